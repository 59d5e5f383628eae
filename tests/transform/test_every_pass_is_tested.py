"""Every file of loom/transform/ has its test file here (a pass: before/expected tests)."""

import pathlib

TRANSFORM = pathlib.Path(__file__).parents[2] / "loom" / "transform"
TESTS = pathlib.Path(__file__).parent
# the pass infrastructure is tested through the PassContext it provides
TEST_OF = {"pass_infra": "test_pass_context"}


def test_every_transform_file_has_a_test_file():
    missing = []
    for path in sorted(TRANSFORM.glob("*.py")):
        if path.stem == "__init__":
            continue
        test = TESTS / f"{TEST_OF.get(path.stem, 'test_' + path.stem)}.py"
        if not test.exists():
            missing.append(f"{path.name}: no {test.name}")
    assert not missing, "passes without tests:\n" + "\n".join(missing)


def test_pass_test_files_compare_before_and_expected_ir():
    """A pass's tests build the expected IR and compare it structurally."""
    weak = []
    for path in sorted(TRANSFORM.glob("*.py")):
        if path.stem in ("__init__", "pass_infra", "pipeline"):
            continue
        text = (TESTS / f"test_{path.stem}.py").read_text()
        if "assert_structural_equal" not in text:
            weak.append(path.stem)
    assert not weak, f"pass tests without a structural before/expected comparison: {weak}"
