"""The contract times of a job's current attempt in the jobs projection (issues 20 and 24): when its
protection ends (`JobStarted.protected_until`, cut short by `SessionCapReached` / `ProtectionRevoked`), and
for a session its cap and the times it is warned before it (`SessionOpened.cap_at`, `warnings_at`). The
API's `Job.protectedUntil`, `sessionCapAt` and `sessionWarningsAt` read them, so no client estimates them.

The projection is rebuilt from the log like every other (`steward audit rebuild`); existing rows take NULL
until then, which the API shows as "not recorded".

Revision ID: 0008_job_contract_times
Revises: 0007_api_rate_buckets
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_job_contract_times"
down_revision = "0007_api_rate_buckets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("proj_jobs", sa.Column("protected_until", sa.Float, nullable=True))
    op.add_column("proj_jobs", sa.Column("session_cap_at", sa.Float, nullable=True))
    op.add_column("proj_jobs", sa.Column("session_warnings_at", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("proj_jobs") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("session_warnings_at")
        batch.drop_column("session_cap_at")
        batch.drop_column("protected_until")
