import pytest

from hbfsim.serve.hardware import BESIDE_SITES, SITES, make_node


@pytest.mark.parametrize("hbm,hbf,packaging", [(8, 0, "shared"), (6, 2, "shared"),
                                               (4, 4, "shared"), (8, 8, "h3"), (4, 4, "h3")])
def test_packagings_accept_figure2_layouts(hbm, hbf, packaging):
    n = make_node(hbm_stacks=hbm, hbf_stacks=hbf, packaging=packaging)
    assert n.hbm.capacity == hbm * 24e9 and n.hbf.capacity == hbf * 375e9
    assert n.hbm.read_bw == hbm * 1000e9 and n.hbf.write_bw == hbf * 8e9
    assert n.label == f"{hbm}+{hbf} {packaging}"


@pytest.mark.parametrize("hbm,hbf,packaging,word", [
    (6, 4, "shared", "sites"), (0, 4, "shared", "at least 1"), (4, 8, "h3", "behind"),
    (9, 0, "h3", "behind"), (4, 4, "stacked", "packaging"), (6, 6, "shared", "sites"),
    (10, 7, "beside", "at most 16")])
def test_packagings_reject_impossible_layouts(hbm, hbf, packaging, word):
    with pytest.raises(ValueError, match=word):
        make_node(hbm_stacks=hbm, hbf_stacks=hbf, packaging=packaging)


def test_sites_and_presets():
    assert SITES == 8
    with pytest.raises(ValueError, match="gpu must be one of"):
        make_node(gpu="a100")
    n = make_node(gpu="h200")
    assert n.gpu.peak("bf16") == 989.4e12 and n.gpu.peak("fp8") == 1978.9e12
    with pytest.raises(ValueError, match="dtype"):
        n.gpu.peak("int4")


def test_beside_gives_every_stack_a_site_and_hbm3e_is_an_h200s():
    """FlashAccel's CSI: 6 HBF stacks beside an H200's 6 HBM3e stacks (141 GB, 4.8 TB/s);
    CLI (1 + 5) fits the shared sites as well."""
    assert BESIDE_SITES == 16
    csi = make_node(gpu="h200", hbm_stacks=6, hbf_stacks=6, packaging="beside",
                    hbm_stack="hbm3e")
    assert csi.hbm.capacity == pytest.approx(141e9) and csi.hbm.read_bw == pytest.approx(4.8e12)
    assert csi.hbm.read_pj_per_bit == pytest.approx(8 / 2.68)
    assert csi.hbf.capacity == 6 * 375e9 and csi.label == "6+6 beside, hbm3e"
    cli = make_node(hbm_stacks=1, hbf_stacks=5, hbm_stack="hbm3e")
    assert cli.label == "1+5 shared, hbm3e" and cli.hbm.capacity == pytest.approx(23.5e9)
    with pytest.raises(ValueError, match="hbm stack must be one of"):
        make_node(hbm_stack="hbm4")


def test_beside_costs_as_shared_sites(qwen32):
    """``beside`` only lifts the site budget: on a layout both packagings hold, an
    iteration costs the same (every stack on its own link)."""
    from hbfsim.serve.cost import CostModel

    args = (8, 8 * 100_000, 2e6, 2e6, 8, 0, 8)  # memory-bound: H3 sends HBF bytes via HBM
    t = [CostModel(make_node(hbm_stacks=4, hbf_stacks=4, packaging=p), qwen32)
         .iteration_seconds(*args) for p in ("shared", "beside", "h3")]
    assert t[0] == t[1] != t[2]
