"""Runs Apache Kafka's Java client driver and CLI tools (tests/clients/java, built by
tests/run with Maven into tests/clients/java/target) for test_java_client.py and
test_kafka_cli.py. One classpath serves both: the driver jar and every runtime jar."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT

JAVA_DIR = REPO_ROOT / "tests" / "clients" / "java"
DRIVER_JAR = JAVA_DIR / "target" / "java-check.jar"
LIB_DIR = JAVA_DIR / "target" / "lib"
BUILD_HINT = "run tests/run e2e (or: mvn -q -B -f tests/clients/java/pom.xml package)"
RUN_TIMEOUT_S = 180


def java_classpath() -> str:
    """The classpath, failing the test when the Maven build is missing (tests/run rebuilds it
    whenever the pom or a source changed, by content, not by mtime)."""
    if shutil.which("java") is None:
        pytest.skip("no `java` on PATH: tests/run installs a JDK")
    if not DRIVER_JAR.exists() or not LIB_DIR.is_dir():
        pytest.fail(f"{DRIVER_JAR} missing: {BUILD_HINT}")
    return f"{DRIVER_JAR}:{LIB_DIR}/*"


def run_java(classpath: str, main_class: str, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["java", "-cp", classpath, main_class, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    if check:
        assert done.returncode == 0, f"{main_class} {' '.join(args)} exited {done.returncode}\n{done.stderr[-4000:]}"
    return done


def run_driver(classpath: str, subcommand: str, bootstrap: str, topic: str, *args: str) -> dict:
    """One subcommand of the Java driver (sluice.check.Main); its JSON answer."""
    done = run_java(classpath, "sluice.check.Main", subcommand, "--bootstrap", bootstrap, "--topic", topic, *args)
    return json.loads(done.stdout)
