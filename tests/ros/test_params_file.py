"""Parameter files in the ROS convention: a misspelt node section, a file that does not parse or
does not exist, and NaN are refused at start-up with one clear line naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rt_fusion.ros import params_file
from rt_fusion.ros.params_file import ParameterFileError
from tests.conftest import ProcGroup


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / 'params.yaml'
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ('pattern', 'fqn', 'applies'),
    [
        ('fusion', '/fusion', True),
        ('/fusion', '/fusion', True),
        ('/**', '/fusion', True),
        ('/**', '/ns/fusion', True),
        ('/ns/fusion', '/ns/fusion', True),
        ('fusion', '/ns/fusion', False),
        ('fusoin', '/fusion', False),
        ('/ns/*', '/ns/fusion', True),
    ],
)
def test_sections_apply_as_rcl_applies_them(pattern: str, fqn: str, applies: bool) -> None:
    assert params_file.section_matches(pattern, fqn) is applies


def test_a_misspelt_section_is_named_with_the_closest_node(tmp_path: Path) -> None:
    path = _write(tmp_path, 'fusoin:\n  ros__parameters:\n    threads: 2\n')
    with pytest.raises(ParameterFileError, match=r"no section for node /fusion.*'fusoin'"):
        params_file.check_node_has_section([path], '/fusion')
    params_file.check_node_has_section([], '/fusion')  # no file: nothing to check
    with pytest.raises(ParameterFileError, match=r"section 'fusoin' is for no node.*'fusion'"):
        params_file.check_sections_known(path, ['fusion', 'planner'])


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('fusion:\n  ros__parameters:\n    threads: [1,\n', r'line \d+ column \d+: not YAML'),
        ('- fusion\n', 'expected node sections'),
        ('fusion:\n  threads: 2\n', "section 'fusion' has no 'ros__parameters'"),
        ('fusion:\n  ros__parameters: 3\n', 'must be a mapping'),
    ],
)
def test_broken_files_give_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ParameterFileError, match=message) as err:
        params_file.load(_write(tmp_path, text))
    assert '\n' not in str(err.value)
    with pytest.raises(ParameterFileError, match='No such file'):
        params_file.load(tmp_path / 'missing.yaml')


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('fusoin:\n  ros__parameters:\n    threads: 2\n', "did you mean 'fusoin'"),
        ('fusion:\n  ros__parameters:\n    threads: [1,\n', 'not YAML'),
        ('fusion:\n  ros__parameters:\n    sync:\n      max_wait_s: .nan\n', 'sync.max_wait_s'),
        (None, 'No such file'),
    ],
    ids=['misspelt-section', 'not-yaml', 'nan', 'missing-file'],
)
def test_the_node_refuses_to_start_with_one_clear_line(
    procs: ProcGroup, tmp_path: Path, text: str | None, message: str
) -> None:
    path = _write(tmp_path, text) if text is not None else tmp_path / 'missing.yaml'
    fusion = procs.node('fusion_node', '--params-file', str(path), name='fusion')
    assert fusion.wait(60) == 2
    stderr = '\n'.join(fusion.stderr)
    assert message in stderr, stderr
    assert 'Traceback' not in stderr, stderr


def test_a_string_parameter_given_as_a_number_is_taken_as_its_text() -> None:
    """``microphone_node -p device:=99`` (a device index: YAML reads it as an integer) was
    refused as not a string; a numeric device is an index, so it is taken as '99'."""
    import rclpy  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from rt_fusion.nodes.microphone_node import MicrophoneParams  # noqa: PLC0415
    from rt_fusion.ros import parameters  # noqa: PLC0415
    from tests.conftest import ros_context  # noqa: PLC0415

    with ros_context() as context:
        node = rclpy.create_node(
            'microphone', context=context, parameter_overrides=[Parameter('device', value=99)]
        )
        try:
            assert parameters.declare_params(node, MicrophoneParams).device == '99'
        finally:
            node.destroy_node()


def test_a_plain_node_refuses_a_misspelt_parameter(procs: ProcGroup) -> None:
    """frame_probe_node (not a lifecycle node) took ``-p rol:=listener`` and exited 0."""
    proc = procs.node('frame_probe_node', '-p', 'rol:=listener')
    assert proc.wait(60) == 2
    assert any("'rol'" in x and 'unknown parameter' in x for x in proc.stderr), proc.stderr
