def test_run_ls_kill(server):
    r = server.run("agent", "run", "--provider", "testp", "--path", "demo/hello", "hi", check=True)
    path, uuid = r.stdout.split()
    assert path == "demo/hello" and len(uuid) == 36
    r = server.run("agent", "get", "demo/hello", "--json", check=True)
    assert '"demo/hello"' in r.stdout
