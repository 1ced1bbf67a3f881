"""ROS parameter files (``--params-file``): loaded with one clear line per error, and checked for
sections that apply to no node.

rcl applies a parameter file section by section: ``fusion:`` (or ``/fusion:``, ``/**:``,
``/ns/fusion:``) to the node of that name. A misspelt section (``fusoin:``) is applied to nothing
and the node runs silently on its defaults; a file that does not parse ends in an RCLError
traceback from ``rclpy.init``. Here both become one line that names the file and the section.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rt_fusion.core.errors import RtFusionError

PARAMS_KEY = 'ros__parameters'


class _Loader(yaml.SafeLoader):
    """Safe YAML, plus the ``!!python/tuple`` that launch_ros writes for list parameters."""


_Loader.add_constructor(
    'tag:yaml.org,2002:python/tuple',
    lambda loader, node: loader.construct_sequence(node),  # type: ignore[arg-type]
)


class ParameterFileError(RtFusionError):
    """A parameter file is missing, does not parse, or has a section no node will read."""


def load(path: str | Path) -> dict[str, Any]:
    """The file's node sections, ``{node pattern: {parameter: value}}``.

    Raises:
        ParameterFileError: the file is missing or unreadable, is not YAML, or is not a mapping of
            node sections each holding a ``ros__parameters`` mapping.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ParameterFileError(f'parameter file {path}: {err.strerror or err}') from err
    try:
        doc = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, 'problem_mark', None)
        where = f' line {mark.line + 1} column {mark.column + 1}' if mark is not None else ''
        problem = getattr(err, 'problem', None) or str(err).splitlines()[0]
        raise ParameterFileError(f'parameter file {path}{where}: not YAML: {problem}') from err
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ParameterFileError(
            f'parameter file {path}: expected node sections (`fusion: {{ros__parameters: ...}}`),'
            f' got a {type(doc).__name__}'
        )
    sections: dict[str, Any] = {}
    for key, section in doc.items():
        node = str(key)
        if not isinstance(section, Mapping) or PARAMS_KEY not in section:
            raise ParameterFileError(
                f'parameter file {path}: section {node!r} has no {PARAMS_KEY!r} mapping'
            )
        params = section[PARAMS_KEY]
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ParameterFileError(
                f'parameter file {path}: {node}.{PARAMS_KEY} must be a mapping of parameters'
            )
        sections[node] = dict(params)
    return sections


def section_matches(pattern: str, node_fqn: str) -> bool:
    """Whether the section ``pattern`` applies to the node with the fully qualified name.

    rcl's rules, for the patterns people write: ``name`` and ``/name`` are the node at the root
    namespace, ``/ns/name`` a namespaced one, ``*`` one name component, ``/**`` any.
    """
    pattern = '/' + pattern.lstrip('/')
    if pattern in ('/**', '/**/*'):
        return True
    glob = pattern.replace('/**', '/*')  # fnmatch's * already spans slashes
    return fnmatch.fnmatchcase(node_fqn, glob)


def files_in_args(args: Sequence[str]) -> list[str]:
    """The ``--params-file`` paths of a node's command line (after ``--ros-args``)."""
    files: list[str] = []
    for i, arg in enumerate(args):
        if arg == '--params-file' and i + 1 < len(args):
            files.append(args[i + 1])
        elif arg.startswith('--params-file='):
            files.append(arg.split('=', 1)[1])
    return files


def check_node_has_section(paths: Iterable[str | Path], node_fqn: str) -> None:
    """Fails when parameter files were given to the node and none has a section for it.

    Raises:
        ParameterFileError: naming the files, their sections and the closest to the node's name.
    """
    seen: dict[str, list[str]] = {}
    for path in paths:
        sections = load(path)
        if any(section_matches(pattern, node_fqn) for pattern in sections):
            return
        seen[str(path)] = list(sections)
    if not seen:
        return
    name = node_fqn.rsplit('/', 1)[-1]
    every = [s for sections in seen.values() for s in sections]
    close = difflib.get_close_matches(name, [s.lstrip('/').rsplit('/', 1)[-1] for s in every])
    hint = f'; did you mean {close[0]!r}?' if close else ''
    files = ', '.join(f'{p} (sections: {", ".join(s) or "none"})' for p, s in seen.items())
    raise ParameterFileError(
        f'no section for node {node_fqn} in {files}{hint} '
        '(a misspelt section would leave the node on its defaults)'
    )


def check_sections_known(path: str | Path, known: Iterable[str]) -> dict[str, Any]:
    """Loads a graph's parameter file and fails on a section for a node the graph does not have.

    Returns the sections.

    Raises:
        ParameterFileError: naming the unknown section and the nearest known node name.
    """
    sections = load(path)
    names = sorted(set(known))
    for pattern in sections:
        if '*' in pattern:
            continue
        if pattern.lstrip('/').rsplit('/', 1)[-1] in names:
            continue
        close = difflib.get_close_matches(pattern.lstrip('/'), names)
        hint = f'did you mean {close[0]!r}? ' if close else ''
        raise ParameterFileError(
            f'parameter file {path}: section {pattern!r} is for no node of this graph '
            f'({hint}nodes: {", ".join(names)})'
        )
    return sections
