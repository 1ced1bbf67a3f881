"""scenario_bag's cache: the same scenario is generated once; the same name with other content
(a YAML edited in place) is generated again."""

from __future__ import annotations

from pathlib import Path

import yaml

from rt_fusion.ros.harness.scenarios import scenario_bag
from tests.conftest import ROOT


def test_a_scenario_edited_under_its_name_is_generated_again(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'cut_in.yaml').read_text())
    path = tmp_path / 'cut_in.yaml'
    path.write_text(yaml.safe_dump(doc))
    said: list[str] = []
    out = tmp_path / 'bag_out'

    def make() -> None:
        scenario_bag(str(path), 0.3, out, ROOT / 'config' / 'scenarios', log=said.append,
                     resolution=(64, 36))  # fmt: skip

    make()
    make()
    assert len(said) == 1, said  # the second call found it
    doc['actors'][0]['speed'] = 11.0  # same name, other content
    path.write_text(yaml.safe_dump(doc))
    make()
    assert len(said) == 2, said
    assert (out / 'bag').is_dir()
