"""The first schema: runs, their cells and verdicts, and the advisory lock's holders.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(80), nullable=False, unique=True),
        sa.Column("created", sa.String(40), nullable=False),
        sa.Column("label", sa.String(300), nullable=False),
        sa.Column("simulated", sa.Boolean, nullable=False),
        sa.Column("deployment", sa.String(200), nullable=True),
        sa.Column("baseline_version", sa.Integer, nullable=True),
        sa.Column("fingerprint", sa.JSON, nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("interrupted", sa.Boolean, nullable=False),
        sa.Column("outage", sa.Boolean, nullable=False),
        sa.Column("suite_version", sa.String(40), nullable=False),
        sa.Column("git_revision", sa.String(80), nullable=False),
        sa.Column("entry", sa.JSON, nullable=False),
    )
    op.create_index("runs_label_created", "runs", ["label", "created"])
    op.create_index("runs_created", "runs", ["created"])
    op.create_table(
        "cells",
        sa.Column("run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("case_id", sa.String(200), primary_key=True),
        sa.Column("metric", sa.String(40), primary_key=True),
        sa.Column("median", sa.Float, nullable=True),
        sa.Column("se", sa.Float, nullable=True),
        sa.Column("repeats", sa.JSON, nullable=False),
    )
    op.create_table(
        "verdicts",
        sa.Column("run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("case_id", sa.String(200), nullable=False),
        sa.Column("factor", sa.String(40), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("change", sa.Float, nullable=True),
        sa.Column("low", sa.Float, nullable=True),
        sa.Column("high", sa.Float, nullable=True),
        sa.Column("tolerance", sa.Float, nullable=True),
    )
    op.create_index("verdicts_status", "verdicts", ["status", "factor"])
    op.create_table(
        "lock_holders",
        sa.Column("server", sa.String(300), primary_key=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("command", sa.String(300), nullable=False),
        sa.Column("since", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    for table in ("lock_holders", "verdicts", "cells", "runs"):
        op.drop_table(table)
