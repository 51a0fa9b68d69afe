"""The benchmark-only training options read from RECO_TRAIN_LAB, outside the production config."""
from __future__ import annotations

import pytest

from components.train.gang.lab import ENV, LabOptions, lab_options


def test_unset_means_production_behaviour():
    assert lab_options({}) == LabOptions(export=True, pin_cpus=False, interactions=True)


def test_the_ablation_switch_reads_false():
    assert lab_options({ENV: '{"interactions": false}'}) == LabOptions(interactions=False)


def test_the_env_entry_round_trips():
    options = LabOptions(export=False, pin_cpus=True)
    assert lab_options(options.env()) == options


@pytest.mark.parametrize("raw, says", [("{export: false}", "not JSON"), ('{"exports": false}', "keys from"),
                                       ('["export"]', "JSON object"), ('{"export": "no"}', "true or false")])
def test_a_typo_fails_instead_of_being_ignored(raw, says):
    with pytest.raises(ValueError, match=says):
        lab_options({ENV: raw})
