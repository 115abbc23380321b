import pytest

from hbfsim.serve.hardware import SITES, make_node


@pytest.mark.parametrize("hbm,hbf,packaging", [(8, 0, "shared"), (6, 2, "shared"),
                                               (4, 4, "shared"), (8, 8, "h3"), (4, 4, "h3")])
def test_packagings_accept_figure2_layouts(hbm, hbf, packaging):
    n = make_node(hbm_stacks=hbm, hbf_stacks=hbf, packaging=packaging)
    assert n.hbm.capacity == hbm * 24e9 and n.hbf.capacity == hbf * 375e9
    assert n.hbm.read_bw == hbm * 1000e9 and n.hbf.write_bw == hbf * 8e9
    assert n.label == f"{hbm}+{hbf} {packaging}"


@pytest.mark.parametrize("hbm,hbf,packaging,word", [
    (6, 4, "shared", "sites"), (0, 4, "shared", "at least 1"), (4, 8, "h3", "behind"),
    (9, 0, "h3", "behind"), (4, 4, "stacked", "packaging")])
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
