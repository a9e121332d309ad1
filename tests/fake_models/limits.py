"""Each vendor's usage-limit reply, as its real API sends it: the 429 body (and headers)
a :class:`~fake_models.script.RateLimit` step serves (``RateLimit(**GEMINI_DAILY)``).

Sources (the wording of the bodies; the CLIs' reading of them is in each adapter):

- Gemini API, a free tier's daily request quota: ``RESOURCE_EXHAUSTED`` with a
  ``QuotaFailure`` whose ``quotaId`` names a per-day quota and a ``RetryInfo`` (the body
  quoted in gemini-cli's issues, e.g. google-gemini/gemini-cli#8414, and the shape its
  ``classifyGoogleError`` reads: a ``PerDay`` quota id is terminal);
- OpenAI-compatible API (OpenCode's provider here), a plan's quota spent:
  ``insufficient_quota`` (OpenAI's "You exceeded your current quota" error);
- Anthropic Messages API (pi's provider here), a subscription's usage limit: a 429
  ``rate_limit_error`` with ``anthropic-ratelimit-unified-status: rejected`` and the
  reset in ``anthropic-ratelimit-unified-reset`` (Unix seconds), the headers Claude Code
  reads for its "Usage limit reached" line.
"""

from __future__ import annotations

import time


def gemini_daily(model: str = "gemini-2.5-pro") -> dict:
    message = (
        "You exceeded your current quota, please check your plan and billing details. For "
        "more information on this error, head to: https://ai.google.dev/gemini-api/docs/"
        "rate-limits. To monitor your current usage, head to: https://ai.dev/usage?tab="
        "rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/"
        f"generate_content_free_tier_requests, limit: 100, model: {model}\n"
        "Please retry in 37.467711s."
    )
    body = {
        "error": {
            "code": 429,
            "message": message,
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.Help",
                    "links": [
                        {
                            "description": "Learn more about Gemini API quotas",
                            "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                        }
                    ],
                },
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/"
                            "generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                            "quotaDimensions": {"location": "global", "model": model},
                            "quotaValue": "100",
                        }
                    ],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
            ],
        }
    }
    return {"body": body, "retry_after": None, "times": 10_000}


def openai_quota() -> dict:
    body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details. For more information on this error, read the docs: "
            "https://platform.openai.com/docs/guides/error-codes/api-errors.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    return {"body": body, "retry_after": None, "times": 10_000}


def anthropic_usage_limit(reset_in: float = 3600.0) -> dict:
    reset = int(time.time() + reset_in)
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. Please try again later.",
        },
        "request_id": "req_011CV2fake0limit0reached000",
    }
    headers = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(reset),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-status": "rejected",
        "anthropic-ratelimit-unified-5h-reset": str(reset),
        "anthropic-ratelimit-unified-5h-utilization": "1.0",
        "anthropic-ratelimit-unified-overage-status": "rejected",
        "anthropic-ratelimit-unified-overage-disabled-reason": "org_level_disabled",
        "x-should-retry": "true",
    }
    return {"body": body, "headers": headers, "retry_after": int(reset_in), "times": 10_000}


def codex_usage_limit(reset_in: float = 3 * 3600.0) -> dict:
    """ChatGPT's Codex plan spent: a 429 ``usage_limit_reached`` with its reset (the
    fields codex-rs's ``ErrorResponse`` reads: ``plan_type``, ``resets_at``,
    ``resets_in_seconds``), which Codex turns into "You've hit your usage limit"."""
    body = {
        "error": {
            "type": "usage_limit_reached",
            "message": "The usage limit has been reached",
            "plan_type": "plus",
            "resets_at": int(time.time() + reset_in),
            "resets_in_seconds": int(reset_in),
        }
    }
    return {"body": body, "retry_after": None, "times": 10_000}
