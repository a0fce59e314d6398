from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """Folder of the real evaluation datasets; tests using it skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not available ({SHARED_DATA} is absent)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (``local[2]``, small driver memory) for the whole test run.

    Skips only when pyspark or Java is missing; Spark start-up is paid once, by the tests that
    ask for this fixture.
    """
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (no java on PATH and JAVA_HOME unset)")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("polars-dp-tests")
               .config("spark.driver.memory", "1g")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.codegen.wholeStage", "false")
               .config("spark.sql.adaptive.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
