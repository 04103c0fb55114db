"""Create the configured PostgreSQL database if it does not exist yet (`make serve` runs it
before migrating). SQLite creates its file by itself: nothing to do."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import connection


class Command(BaseCommand):
    help = "Create the configured PostgreSQL database if it is missing."

    def handle(self, *args, **options) -> None:
        if connection.vendor != "postgresql":
            return
        import psycopg
        from psycopg import sql

        settings = connection.settings_dict
        name = settings["NAME"]
        params = connection.get_connection_params()
        params["dbname"] = "postgres"  # the maintenance database every server has
        try:
            with psycopg.connect(**params, autocommit=True) as server:
                exists = server.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [name]
                ).fetchone()
                if not exists:
                    server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                    self.stdout.write(f"Created database {name}.")
        except psycopg.Error as exc:
            raise CommandError(f"Could not reach or create database {name!r}: {exc}") from exc
