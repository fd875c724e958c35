"""CALL <catalog>.system.<maintenance procedure>(...) and the `tablestore table ...` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.cli import main
from tablestore.errors import ValidationError
from tablestore.sql.session import SqlSession
from tests.lakehouse_config import lakehouse_config, sqlite_catalog


@pytest.fixture
def session(tmp_path: Path) -> SqlSession:
    # lakehouse_config also writes tmp_path/tablestore.yaml, which the CLI test hands to the commands.
    s = SqlSession(lakehouse_config(tmp_path, sqlite_catalog(tmp_path, "cat")))
    s.execute("CREATE NAMESPACE db; CREATE TABLE db.t (id bigint, c string) PARTITIONED BY (c)")
    table = s.manager.catalog().load_table("db.t")
    for i in range(6):  # appended through the API: INSERT would start Spark
        table.append(pa.table({"id": [i, i + 100], "c": ["a", "b"]}))
    return s


def _count(session: SqlSession) -> int:
    return session.manager.catalog().load_table("db.t").scan().count()


def _one(session: SqlSession, sql: str) -> dict[str, object]:
    result = session.execute(sql)[-1]
    assert len(result.rows) == 1
    return dict(zip(result.columns, result.rows[0], strict=True))


def test_maintenance_procedures_have_icebergs_arguments_and_columns(session: SqlSession) -> None:
    r = _one(session, "CALL cat.system.rewrite_data_files(table => 'db.t', options => map('min-input-files', '2'))")
    assert r == {"rewritten_data_files_count": 12, "added_data_files_count": 2,
                 "rewritten_bytes_count": r["rewritten_bytes_count"], "failed_data_files_count": 0,
                 "removed_delete_files_count": 0}
    r = _one(session, "CALL cat.system.rewrite_data_files(table => 'db.t', strategy => 'sort', "
                      "sort_order => 'id DESC', where => 'id < 100', options => map('rewrite-all', 'true'))")
    assert r["rewritten_data_files_count"] == 1
    assert _one(session, "CALL cat.system.rewrite_manifests('db.t')") == {
        "rewritten_manifests_count": 8, "added_manifests_count": 1}
    assert _one(session, "CALL cat.system.rewrite_position_delete_files(table => 'db.t')") == {
        "rewritten_delete_files_count": 0, "added_delete_files_count": 0, "rewritten_bytes_count": 0,
        "added_bytes_count": 0}
    r = _one(session, "CALL cat.system.expire_snapshots(table => 'db.t', older_than => TIMESTAMP '2999-01-01 "
                      "00:00:00', retain_last => 1)")
    assert r["deleted_data_files_count"] == 13 and r["deleted_manifest_lists_count"] == 8
    assert set(r) == {"deleted_data_files_count", "deleted_position_delete_files_count",
                      "deleted_equality_delete_files_count", "deleted_manifest_files_count",
                      "deleted_manifest_lists_count", "deleted_statistics_files_count"}
    result = session.execute("CALL cat.system.remove_orphan_files(table => 'db.t', dry_run => true)")[-1]
    assert result.columns == ["orphan_file_location"] and result.rows == []
    assert _count(session) == 12
    with pytest.raises(ValidationError, match="retain_last must be an integer"):
        session.execute("CALL cat.system.expire_snapshots(table => 'db.t', retain_last => 'x')")


def test_cli_maintenance_commands(session: SqlSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(tmp_path / "tablestore.yaml")
    assert main(["table", "compact", "db.t", "--option", "min-input-files=2", "--format", "json",
                 "--config", config]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["rows"][0][0] == 12
    assert main(["table", "expire-snapshots", "db.t", "--retain-last", "1", "--older-than", "2999-01-01",
                 "--format", "json", "--config", config]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["rows"][0][0] == 12
    assert main(["table", "remove-orphans", "db.t", "--dry-run", "--format", "json", "--config", config]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["rows"] == []
    assert main(["erase", "--table", "db.t", "--column", "id", "--values", "1,101", "--request-id", "R9",
                 "--config", config]) == 0
    assert "R9" in capsys.readouterr().out
    assert _count(session) == 10
    assert main(["table", "compact", "db.t", "--option", "nonsense", "--config", config]) == 1
    assert "KEY=VALUE" in capsys.readouterr().err
