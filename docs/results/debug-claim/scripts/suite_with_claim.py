"""`steward sim suite` with the `steward` preset's lane_claim on (ADR 0099 measurement): CLAIM_GRACE (seconds)
is lane_claim_grace_s, CLAIM_VMAX (optional) lane_victim_max_gpus; CLAIM_OFF=1 turns it off. Workers fork, so they inherit the patch."""
import os
import sys

from steward.domain.policy_settings import PolicySettings

grace = os.environ.get("CLAIM_GRACE")
if os.environ.get("CLAIM_OFF"):  # the `steward` preset with the claim off (once it is the default)
    orig_off = PolicySettings.steward.__func__  # type: ignore[attr-defined]

    def steward_off(cls, **overrides):  # type: ignore[no-untyped-def]
        return orig_off(cls, **{"lane_claim": False, **overrides})

    PolicySettings.steward = classmethod(steward_off)  # type: ignore[method-assign,assignment]
elif grace is not None:
    extra = {"lane_claim": True, "lane_claim_grace_s": float(grace)}
    if os.environ.get("CLAIM_VMAX"):  # lane_victim_max_gpus too
        extra["lane_victim_max_gpus"] = int(os.environ["CLAIM_VMAX"])
    orig = PolicySettings.steward.__func__  # type: ignore[attr-defined]

    def steward(cls, **overrides):  # type: ignore[no-untyped-def]
        return orig(cls, **{**extra, **overrides})

    PolicySettings.steward = classmethod(steward)  # type: ignore[method-assign,assignment]

from steward.cli.main import main  # noqa: E402

sys.argv = ["steward", "sim", "suite", *sys.argv[1:]]
sys.exit(main())
