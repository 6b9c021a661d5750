"""A table drawn with replacement (people repeat) never yields a release fit for publication."""

import pytest

import ppdp


@pytest.mark.parametrize("mech", [ppdp.UniformPerturbation(retention=0.5), ppdp.Anatomy(3)])
def test_with_replacement_release_is_not_fit(mech):
    t = ppdp.datasets.load("occ", n=2000, seed=0)
    big, replaced = t.sample(10 * t.n_rows, seed=1)  # 10N rows: each person about 10 times
    assert replaced and big.drawn_with_replacement
    rel = ppdp.publish(big, mech)
    assert rel.manifest["fit_for_publication"] is False and "with replacement" in rel.manifest["sampling"]
    # control: the same mechanism on rows drawn without replacement, unseeded, is fit
    small, replaced = t.sample(t.n_rows // 2, seed=1)
    assert not replaced and ppdp.publish(small, mech).manifest["fit_for_publication"] is True


def test_with_replacement_release_still_verifies_as_a_test_release(tmp_path):
    t = ppdp.datasets.load("occ", n=2000, seed=0)
    big, _ = t.sample(3 * t.n_rows, seed=2)
    rel = ppdp.publish(big, ppdp.UniformPerturbation(retention=0.5))
    rel.save(tmp_path / "r")
    rep = ppdp.verify(tmp_path / "r")
    assert rep.ok and rep.facts["fit_for_publication"] is False
