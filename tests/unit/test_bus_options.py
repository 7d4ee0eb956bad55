"""The Kafka connection options every client of a process uses (steward.bus.kafka.client_options): SASL
SCRAM-SHA-512 as the process's principal, over SASL_SSL with the broker's certificate and host name checked
when STEWARD_KAFKA_CA_FILE names the project's CA (ADR 0039); no password or a missing CA file is an error
naming the file, never a fall back."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.bus.kafka import MissingCredentials, client_options
from steward.config import Settings


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "steward-ledger.password").write_text("pw-ledger\n")
    return Settings(run_dir=tmp_path, kafka_secrets_dir=str(secrets), component="ledger",
                    kafka_bootstrap="127.0.0.1:9094")


def test_plain_sasl_without_a_ca(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEWARD_KAFKA_CA_FILE", raising=False)
    options = client_options(settings)
    assert options == {"bootstrap_servers": "127.0.0.1:9094", "security_protocol": "SASL_PLAINTEXT",
                       "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "steward-ledger",
                       "sasl_plain_password": "pw-ledger"}


def test_a_ca_file_means_tls_with_the_certificate_and_host_name_checked(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("STEWARD_KAFKA_CA_FILE", str(ca))
    options = client_options(settings)
    assert (options["security_protocol"], options["ssl_cafile"], options["ssl_check_hostname"]) == (
        "SASL_SSL", str(ca), True)
    assert options["sasl_plain_username"] == "steward-ledger"


def test_a_missing_ca_file_is_named_not_skipped(settings: Settings, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEWARD_KAFKA_CA_FILE", str(tmp_path / "gone.pem"))
    with pytest.raises(MissingCredentials, match=r"STEWARD_KAFKA_CA_FILE names .*gone\.pem, which is not a file"):
        client_options(settings)


def test_no_password_is_named(settings: Settings) -> None:
    with pytest.raises(MissingCredentials, match="no Kafka password for steward-api"):
        client_options(settings, "steward-api")
