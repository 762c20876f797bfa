from __future__ import annotations

import subprocess
import sys

from perfkit import __version__


def test_version(cli):
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"perfkit {__version__}"


def test_python_dash_m_works():
    out = subprocess.run([sys.executable, "-m", "perfkit", "--version"],
                         capture_output=True, text=True, check=True)
    assert __version__ in out.stdout


def test_profiles_lists_builtins_with_descriptions(cli):
    result = cli("profiles")
    assert result.exit_code == 0
    for name in ("default", "sharegpt", "llama3-8b-gpu"):
        assert name in result.stdout
    assert "ShareGPT" in result.stdout


def test_profiles_show_prints_resolved_toml(cli):
    result = cli("profiles", "show", "sharegpt", "--set", "engine.block_size=32")
    assert result.exit_code == 0
    assert 'name = "sharegpt"' in result.stdout
    assert "block_size = 32" in result.stdout
    assert "max_model_len = 2048" in result.stdout


def test_profiles_show_model_override(cli):
    result = cli("profiles", "show", "default", "--model", "llama3-70b")
    assert result.exit_code == 0
    assert "num_layers = 80" in result.stdout


def test_misspelled_key_exits_2_with_suggestion(cli, write_profile):
    path = write_profile("[engine]\nblock_sise = 16\n")
    result = cli("profiles", "show", str(path))
    assert result.exit_code == 2
    assert "block_sise" in result.stderr
    assert "block_size" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_bad_inputs_exit_2_one_line(cli, write_profile):
    cases = [
        ("profiles", "show", "no-such"),
        ("profiles", "show", str(write_profile("[engine\n"))),
        ("profiles", "show", "default", "--set", "engine.block_size=-1"),
        ("profiles", "show", "default", "--set", "nonsense"),
        ("profiles", "show", "default", "--model", "gpt5"),
    ]
    for args in cases:
        result = cli(*args)
        assert result.exit_code == 2, args
        assert result.stderr.startswith("error:"), (args, result.stderr)
        assert "Traceback" not in result.stderr
