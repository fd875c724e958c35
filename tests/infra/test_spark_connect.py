"""The stack's Spark Connect server gets the JVM-wide settings a tablestore session would set itself.

A Connect client sets only SQL settings, so the Python daemon with tablestore preloaded, the
Arrow batch sizes and unchecked Arrow memory must be the server's own (``infra.spark_connect``).
The server itself runs in the stack test (``test_docker_stack.py``)."""

from __future__ import annotations

from pathlib import Path

from infra.spark_connect import APP_NAME, SERVER_CLASS, command, server_conf
from tablestore.spark import DEFAULT_CONF, REQUIRED_CONF, UNSAFE_ARROW_PROPERTY


def test_server_conf_carries_every_setting_a_tablestore_session_needs() -> None:
    conf = server_conf(15002)
    assert conf["spark.python.daemon.module"] == "tablestore.spark.daemon"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert {k: conf[k] for k in {**DEFAULT_CONF, **REQUIRED_CONF}} == {**DEFAULT_CONF, **REQUIRED_CONF}
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert conf[key] == f"-D{UNSAFE_ARROW_PROPERTY}=true"
    assert conf["spark.connect.grpc.binding.port"] == "15002"


def test_command_submits_the_connect_server_to_the_master() -> None:
    argv = command("spark://spark-master:7077", 15002)
    assert Path(argv[0]).name == "spark-submit" and Path(argv[0]).exists()
    assert argv[1:7] == ["--class", SERVER_CLASS, "--name", APP_NAME, "--master", "spark://spark-master:7077"]
    assert "--conf" in argv and "spark.connect.grpc.binding.port=15002" in argv
    assert argv[-1] == "spark-internal"
