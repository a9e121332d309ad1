from orcr_core.cli import main

main()
