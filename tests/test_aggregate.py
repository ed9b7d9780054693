"""The averaging functions on constructed rows, against means worked out by hand."""
import torch

from cfl_core.engine import aggregate as A


def test_weighted_mean_weights_each_row_by_its_count():
    rows = torch.tensor([[1.0, 0.0], [3.0, 4.0]])
    # (1*1 + 3*3) / 4 = 2.5 ; (0*1 + 4*3) / 4 = 3
    assert torch.equal(A.weighted_mean(rows, torch.tensor([1.0, 3.0])), torch.tensor([2.5, 3.0]))


def test_weighted_mean_of_zero_weights_is_zero_not_nan():
    rows = torch.tensor([[5.0, -5.0]])
    assert torch.equal(A.weighted_mean(rows, torch.tensor([0.0])), torch.tensor([0.0, 0.0]))


def test_uniform_mean_ignores_weights():
    rows = torch.tensor([[0.0, 2.0], [4.0, 6.0], [8.0, 1.0]])
    assert torch.equal(A.uniform_mean(rows), torch.tensor([4.0, 3.0]))


def test_grouped_weighted_mean_per_model_and_untrained_models_unchanged():
    previous = torch.tensor([[9.0, 9.0], [7.0, 7.0], [5.0, 5.0]])
    rows = torch.tensor([[1.0, 2.0], [3.0, 6.0], [10.0, 0.0], [2.0, 2.0]])
    groups = torch.tensor([0, 0, 2, 2])
    weights = torch.tensor([1.0, 1.0, 1.0, 4.0])
    out = A.grouped_weighted_mean(rows, groups, weights, previous)
    # model 0: (1+3)/2, (2+6)/2 ; model 1: nobody, stays ; model 2: (10 + 4*2)/5, (0 + 4*2)/5
    assert torch.allclose(out, torch.tensor([[2.0, 4.0], [7.0, 7.0], [3.6, 1.6]]))
    assert torch.equal(out[1], previous[1])


def test_accumulating_in_chunks_gives_exactly_the_one_shot_result():
    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(7, 5, generator=gen)
    groups = torch.tensor([1, 0, 1, 1, 3, 0, 1])
    weights = torch.rand(7, generator=gen) * 50
    previous = torch.randn(4, 5, generator=gen)
    sums, totals = A.zero_sums(previous)
    for lo in range(0, 7, 3):
        A.add_weighted(sums, totals, rows[lo : lo + 3], groups[lo : lo + 3], weights[lo : lo + 3])
    means, trained = A.group_means(sums, totals)
    assert trained.tolist() == [True, True, False, True]
    assert torch.equal(A.keep_untrained(means, previous, trained), A.grouped_weighted_mean(rows, groups, weights, previous))


def test_weighted_means_by_group_lists_only_groups_present_in_order():
    rows = torch.tensor([[2.0], [4.0], [10.0]])
    out = A.weighted_means_by_group(rows, torch.tensor([3, 1, 3]), torch.tensor([1.0, 1.0, 3.0]))
    assert list(out) == [1, 3]
    assert torch.equal(out[1], torch.tensor([4.0]))
    assert torch.equal(out[3], torch.tensor([8.0]))  # (2 + 30) / 4


def test_group_means_report_which_groups_had_weight():
    sums = torch.tensor([[4.0], [0.0]])
    totals = torch.tensor([2.0, 0.0])
    means, trained = A.group_means(sums, totals)
    assert torch.equal(means, torch.tensor([[2.0], [0.0]]))
    assert trained.tolist() == [True, False]


def test_the_product_and_the_index_add_give_the_same_sums():
    # up to GEMM_GROUPS groups add_weighted sums with one matrix product, beyond with index_add (a model per client)
    gen = torch.Generator().manual_seed(1)
    for k in (1, 4, A.GEMM_GROUPS, A.GEMM_GROUPS + 1, 300):
        n = max(2 * k, 9)
        rows = torch.randn(n, 33, generator=gen)
        groups = torch.randint(0, k, (n,), generator=gen)
        weights = torch.rand(n, generator=gen) * 80
        sums, totals = A.zero_sums(torch.zeros(k, 33))
        A.add_weighted(sums, totals, rows, groups, weights)
        want = torch.zeros(k, 33, dtype=torch.float64).index_add_(0, groups, rows.double() * weights.double()[:, None])
        assert torch.allclose(sums.double(), want, rtol=1e-5, atol=1e-4), k
        assert torch.allclose(totals.double(), torch.zeros(k, dtype=torch.float64).index_add_(0, groups, weights.double()))
