"""Sending one delivery: e-mail over SMTP, or a Slack-compatible JSON POST to a webhook. Each message carries
its delivery id (Message-ID, Idempotency-Key) so a receiver drops a second copy of a retried delivery.

A failure says whether trying again can help (`DeliveryError.retryable`): a refused recipient or an HTTP 4xx
other than 408 and 429 will not be accepted later; a connection failure, an SMTP 4xx or an HTTP 5xx may."""

from __future__ import annotations

import email.policy
import hashlib
import hmac
import smtplib
import ssl
from email.message import EmailMessage
from typing import Any

import httpx
import orjson

from steward.domain.notifications import Delivery
from steward.notify.settings import NotifySettings

MAIL_DOMAIN = "steward.notifications"
# CRLF line ends; headers unfolded up to RFC 5322's hard limit (Python folds a short subject onto a line of its
# own, which some readers show with a leading space)
MAIL_POLICY = email.policy.SMTP.clone(max_line_length=998)


class DeliveryError(Exception):
    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


def message_id(d: Delivery) -> str:
    return f"<{d.delivery_id}@{MAIL_DOMAIN}>"


def email_message(settings: NotifySettings, d: Delivery) -> EmailMessage:
    msg = EmailMessage(policy=MAIL_POLICY)
    msg["From"] = settings.mail_from
    msg["To"] = d.target
    msg["Subject"] = f"Steward: {d.title}"
    msg["Message-ID"] = message_id(d)
    msg["X-Steward-Kind"] = d.kind
    msg["X-Steward-Delivery"] = d.delivery_id
    msg.set_content(d.text)
    return msg


def send_email(settings: NotifySettings, d: Delivery) -> None:
    msg = email_message(settings, d)
    try:
        smtp: smtplib.SMTP
        if settings.smtp_ssl:
            smtp = smtplib.SMTP_SSL(settings.smtp_host, settings.smtp_port, timeout=settings.smtp_timeout_s,
                                    context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.smtp_timeout_s)
        with smtp:
            if settings.smtp_starttls and not settings.smtp_ssl:
                smtp.starttls(context=ssl.create_default_context())
            if settings.smtp_user:
                smtp.login(settings.smtp_user, settings.smtp_password)
            smtp.send_message(msg)
    except smtplib.SMTPRecipientsRefused as err:
        raise DeliveryError(f"the mail server refused {d.target}: {err.recipients}", retryable=False) from None
    except smtplib.SMTPResponseException as err:
        raise DeliveryError(f"the mail server answered {err.smtp_code} {err.smtp_error!r}",
                            retryable=err.smtp_code < 500) from None
    except (OSError, smtplib.SMTPException) as err:
        raise DeliveryError(f"cannot send mail through {settings.smtp_host}:{settings.smtp_port}: "
                            f"{err.__class__.__name__}: {err}") from None


def slack_payload(d: Delivery) -> dict[str, Any]:
    """Slack-compatible (an incoming webhook shows `text`); `steward` carries the facts for other receivers."""
    return {"text": f"*{d.title}*\n```{d.text}```",
            "steward": {"delivery_id": d.delivery_id, "kind": d.kind, "job_id": d.job_id, "position": d.position,
                        "subscriber": d.subscriber, "facts": d.facts}}


def post_webhook(settings: NotifySettings, d: Delivery) -> int:
    body = orjson.dumps(slack_payload(d), default=str)
    headers = {"Content-Type": "application/json", "Idempotency-Key": d.delivery_id,
               "X-Steward-Delivery": d.delivery_id, "User-Agent": "steward-notify"}
    if settings.webhook_secret:
        sig = hmac.new(settings.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        headers["X-Steward-Signature"] = f"sha256={sig}"
    try:
        resp = httpx.post(d.target, content=body, headers=headers, timeout=settings.webhook_timeout_s)
    except httpx.HTTPError as err:
        raise DeliveryError(f"cannot reach the webhook: {err.__class__.__name__}: {err}") from None
    if 200 <= resp.status_code < 300:
        return resp.status_code
    retryable = resp.status_code in (408, 429) or resp.status_code >= 500
    raise DeliveryError(f"the webhook answered HTTP {resp.status_code}", retryable=retryable)


def deliver(settings: NotifySettings, d: Delivery) -> None:
    if d.channel == "email":
        send_email(settings, d)
    elif d.channel == "webhook":
        post_webhook(settings, d)
    else:
        raise DeliveryError(f"unknown channel {d.channel!r}", retryable=False)
