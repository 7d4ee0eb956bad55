"""Notifications: `steward notify set|off|list|kinds|failed` (issue 24 "Being told", ADR 0050).

    steward notify set a1 --email alice@lab.example --kinds preemption,job_failed
    steward notify set team-a --webhook https://hooks.slack.com/services/T/B/X --kinds share_changed,burn_forecast
    steward notify off a1 --email alice@lab.example
    steward notify list
    steward notify failed          # operators: deliveries given up after their retries
"""

from __future__ import annotations

from typing import Any

import typer

from steward.cli.client import GraphQLClient
from steward.cli.jobs import refusal
from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.config import get_settings

SET = """
mutation($a: String!, $c: String!, $t: String!, $k: [String!]!, $s: String) {
  setNotifications(allocation: $a, channel: $c, target: $t, kinds: $k, subscriber: $s) {
    __typename
    ... on NotificationsChosen { subscription { subscriber allocation channel target kinds } position }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""
LIST = "query($s: String) { notificationSubscriptions(subscriber: $s) { subscriber allocation channel target kinds } }"
KINDS = "{ notificationKinds { name description } }"
FAILED = """query($first: Int!, $after: BigInt!) { failedDeliveries(first: $first, afterPosition: $after) {
  deliveryId subscriber channel target kind position attempts error failedAt recordedPosition } }"""


def _channel(email: str | None, webhook: str | None) -> tuple[str, str]:
    if bool(email) == bool(webhook):
        fail("give one of --email ADDRESS or --webhook URL", 2)
    return ("email", email) if email else ("webhook", webhook or "")


def _set(allocation: str, channel: str, target: str, kinds: list[str], subscriber: str | None,
         output: OutputFormat) -> None:
    res = GraphQLClient(get_settings()).execute(SET, {"a": allocation, "c": channel, "t": target, "k": kinds,
                                                      "s": subscriber})["setNotifications"]
    why = refusal(res)
    if why is not None:
        fail(why, 2)
    sub = res["subscription"]
    emit(res, output, [[sub["subscriber"], sub["allocation"], sub["channel"], sub["target"],
                        ",".join(sub["kinds"]) or "(off)"]], ["subscriber", "allocation", "channel", "target", "kinds"])


def register(app: typer.Typer) -> None:
    notify_app = typer.Typer(no_args_is_help=True, help="Notifications by e-mail or webhook (everyone).")
    app.add_typer(notify_app, name="notify")

    @notify_app.command("set")
    def set_(
        allocation: str = typer.Argument(..., help="a project, or a node of the tree (its whole subtree)"),
        kinds: str = typer.Option(..., "--kinds", help="comma-separated; `steward notify kinds` lists them"),
        email: str = typer.Option(None, "--email", help="send to this e-mail address"),
        webhook: str = typer.Option(None, "--webhook", help="POST Slack-compatible JSON to this URL"),
        subscriber: str = typer.Option(None, "--subscriber", help="someone else's (admins)"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Choose which notifications of ALLOCATION reach you on one channel (replaces that channel's kinds)."""
        channel, target = _channel(email, webhook)
        chosen = [k.strip() for k in kinds.split(",") if k.strip()]
        if not chosen:
            fail("give at least one kind (or use `steward notify off`)", 2)
        _set(allocation, channel, target, chosen, subscriber, output)

    @notify_app.command("off")
    def off(
        allocation: str = typer.Argument(..., help="the allocation the notifications follow"),
        email: str = typer.Option(None, "--email", help="the e-mail address to stop"),
        webhook: str = typer.Option(None, "--webhook", help="the webhook URL to stop"),
        subscriber: str = typer.Option(None, "--subscriber", help="someone else's (admins)"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Stop the notifications of ALLOCATION on one channel."""
        channel, target = _channel(email, webhook)
        _set(allocation, channel, target, [], subscriber, output)

    @notify_app.command("list")
    def list_(subscriber: str = typer.Option(None, "--subscriber", help="someone else's (admins)"),
              output: OutputFormat = OutputOption) -> None:
        """Your notifications (admins: everyone's)."""
        rows: list[dict[str, Any]] = GraphQLClient(get_settings()).execute(LIST, {"s": subscriber})[
            "notificationSubscriptions"]
        emit(rows, output, [[r["subscriber"], r["allocation"], r["channel"], r["target"], ",".join(r["kinds"])]
                            for r in rows], ["subscriber", "allocation", "channel", "target", "kinds"])

    @notify_app.command("kinds")
    def kinds_(output: OutputFormat = OutputOption) -> None:
        """The kinds of notification, and what each tells."""
        rows = GraphQLClient(get_settings()).execute(KINDS)["notificationKinds"]
        emit(rows, output, [[r["name"], r["description"]] for r in rows], ["kind", "tells"])

    @notify_app.command("failed")
    def failed(first: int = typer.Option(100, "--first", help="at most this many"),
               after: int = typer.Option(0, "--after", help="recorded after this log position"),
               output: OutputFormat = OutputOption) -> None:
        """Deliveries given up after their retries (operators, auditors)."""
        rows = GraphQLClient(get_settings()).execute(FAILED, {"first": first, "after": after})["failedDeliveries"]
        emit(rows, output, [[r["recordedPosition"], r["deliveryId"], r["kind"], r["channel"], r["target"],
                             r["attempts"], r["error"]] for r in rows],
             ["at", "delivery", "kind", "channel", "target", "attempts", "error"])
