"""Alembic's environment for the results store: migrations run on the connection that
store/engine.py opened (in its transaction), never on a URL of their own."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
