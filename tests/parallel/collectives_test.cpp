// Collectives of the world group against closed forms: every dtype, sizes 0, 1 and odd,
// non-contiguous operands, and both the blocking and the awaitable form.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::collectives_test {
namespace {

// Rank r's element i: a small integer, exact in every dtype.
double value(int r, std::int64_t i) { return static_cast<double>((r + i) % 3 + 1); }

// The closed form of `op` over the ranks' values of element i.
double reduced(ReduceOp op, int n, std::int64_t i) {
  double sum = 0, product = 1, max = value(0, i), min = value(0, i);
  for (int r = 0; r < n; ++r) {
    const double v = value(r, i);
    sum += v, product *= v, max = std::max(max, v), min = std::min(min, v);
  }
  switch (op) {
    case ReduceOp::Sum: return sum;
    case ReduceOp::Avg: return sum / n;
    case ReduceOp::Max: return max;
    case ReduceOp::Min: return min;
    case ReduceOp::Product: return product;
  }
  return 0;
}

TEST(Collectives, AllReduceEveryDtypeOpAndSize) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  for (DataType dtype : kNumericTypes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product})
      for (std::int64_t size : kSizes) {
        if (op == ReduceOp::Avg && !is_floating_point(dtype)) continue;
        Tensor t = make(size, dtype, [&](std::int64_t i) { return value(r, i); });
        pg->all_reduce(t, {.op = op}).wait();
        expect_values(t, [&](std::int64_t i) { return reduced(op, n, i); },
                      concat("all_reduce ", name(op), " of ", size, " elements"));
      }
}

// Tensors of 64 KiB and more take the ring all-reduce: an odd count (chunks of unequal
// length), every dtype and op, and several rings in flight at once.
TEST(Collectives, AllReduceLargeTensorsEveryDtypeAndOp) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  constexpr std::int64_t kCount = 100003;
  for (DataType dtype : kNumericTypes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product}) {
      if (op == ReduceOp::Avg && !is_floating_point(dtype)) continue;
      Tensor t = make(kCount, dtype, [&](std::int64_t i) { return value(r, i); });
      pg->all_reduce(t, {.op = op}).wait();
      expect_values(t, [&](std::int64_t i) { return reduced(op, n, i); },
                    concat("large all_reduce ", name(op)));
    }
  std::vector<Tensor> many;
  std::vector<Work> works;
  for (int k = 0; k < 3; ++k) {
    many.push_back(make(kCount, kFloat32, [&](std::int64_t i) { return value(r + k, i); }));
    works.push_back(pg->all_reduce(many.back()));
  }
  when_all(works).wait();
  for (int k = 0; k < 3; ++k)
    expect_values(many[static_cast<std::size_t>(k)], [&](std::int64_t i) { return reduced(ReduceOp::Sum, n, i + k); },
                  concat("ring ", k, " of 3 in flight"));
  Tensor flags = make(kCount, kFloat32, [&](std::int64_t i) { return (r + i) % 3 == 0; }).to(kBool);
  pg->all_reduce(flags).wait();
  expect_values(flags, [&](std::int64_t i) {
    bool any = false;
    for (int q = 0; q < n; ++q) any = any || (q + i) % 3 == 0;
    return any ? 1.0 : 0.0;
  }, "large bool all_reduce");
}

TEST(Collectives, AllReduceBoolIsLogical) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  auto bit = [](int rank, std::int64_t i) { return (rank + i) % 3 == 0; };
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product}) {
    Tensor t = make(7, kFloat32, [&](std::int64_t i) { return bit(r, i); }).to(kBool);
    pg->all_reduce(t, {.op = op}).wait();
    const bool any = op == ReduceOp::Sum || op == ReduceOp::Max;
    expect_values(t, [&](std::int64_t i) {
      bool acc = !any;
      for (int q = 0; q < n; ++q) acc = any ? (acc || bit(q, i)) : (acc && bit(q, i));
      return acc ? 1.0 : 0.0;
    }, concat("bool all_reduce ", name(op)));
  }
}

TEST(Collectives, AllReduceNonContiguousLeavesTheRestAlone) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  // Every other column of a 5 x 8 float64 tensor, transposed: strides (2, 8).
  Tensor base = make(40, kFloat64, [&](std::int64_t i) { return value(r, i); }).view({5, 8});
  Tensor view = base.slice(1, 0, 8, 2).t();
  ASSERT_FALSE(view.is_contiguous());
  pg->all_reduce(view).wait();
  expect_values(base, [&](std::int64_t i) { return i % 2 == 0 ? reduced(ReduceOp::Sum, n, i) : value(r, i); },
                "strided all_reduce");
}

TEST(Collectives, AllReduceInFloat32RoundsOnce) {
  auto pg = world();
  const int n = pg->size();
  // 256 + (n - 1) ones: bfloat16 steps of 2 at 256 lose ones one at a time; float32 keeps them.
  Tensor t = full({3}, pg->rank() == 0 ? 256.0 : 1.0, TensorOptions{.dtype = kBFloat16});
  pg->all_reduce(t, {.op = ReduceOp::Sum, .accumulate_in_float32 = true}).wait();
  const double once = static_cast<float>(BFloat16(static_cast<float>(256 + n - 1)));
  expect_values(t, [&](std::int64_t) { return once; }, "bfloat16 all_reduce accumulated in float32");
  Tensor h = full({3}, pg->rank() == 0 ? 2048.0 : 1.0, TensorOptions{.dtype = kFloat16});
  pg->all_reduce(h, {.op = ReduceOp::Avg, .accumulate_in_float32 = true}).wait();
  const double avg = static_cast<float>(Half(static_cast<float>(2048 + n - 1) / static_cast<float>(n)));
  expect_values(h, [&](std::int64_t) { return avg; }, "float16 average accumulated in float32");
}

TEST(Collectives, AllGatherIntoOneTensorAndAList) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  for (DataType dtype : kNumericTypes)
    for (std::int64_t size : kSizes) {
      Tensor in = make(size, dtype, [&](std::int64_t i) { return value(r, i); });
      Tensor concatenated = zeros({n * size}, TensorOptions{.dtype = dtype});
      pg->all_gather(concatenated, in).wait();
      expect_values(concatenated, [&](std::int64_t k) { return value(static_cast<int>(k / size), k % size); },
                    concat("all_gather concatenated, ", size, " elements"));
      Tensor stacked = zeros({n, size}, TensorOptions{.dtype = dtype});
      pg->all_gather(stacked, in).wait();
      expect_values(stacked, [&](std::int64_t k) { return value(static_cast<int>(k / size), k % size); },
                    "all_gather stacked");
      std::vector<Tensor> list;
      for (int q = 0; q < n; ++q) list.push_back(zeros({size}, TensorOptions{.dtype = dtype}));
      pg->all_gather(list, in).wait();
      for (int q = 0; q < n; ++q)
        expect_values(list[static_cast<std::size_t>(q)], [&](std::int64_t i) { return value(q, i); },
                      concat("all_gather list entry ", q));
    }
}

TEST(Collectives, AllGatherStridedInputAndOutput) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  Tensor in = make(12, kFloat32, [&](std::int64_t i) { return value(r, i); }).view({3, 4}).t();  // [4, 3]
  Tensor out_base = zeros({3, 4 * n}, TensorOptions{.dtype = kFloat32});
  Tensor out = out_base.t();  // [4n, 3], strided
  pg->all_gather(out, in).wait();
  // out[q*4 + a][b] = in_q[a][b] = value(q, b*4 + a)
  for (int q = 0; q < n; ++q)
    expect_values(out.narrow(0, q * 4, 4), [&](std::int64_t k) { return value(q, (k % 3) * 4 + k / 3); },
                  concat("strided all_gather block ", q));
}

TEST(Collectives, ReduceScatterEveryDtype) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  for (DataType dtype : kNumericTypes)
    for (std::int64_t size : kSizes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
        if (op == ReduceOp::Avg && !is_floating_point(dtype)) continue;
        Tensor in = make(n * size, dtype, [&](std::int64_t k) { return value(r, k); });
        Tensor out = zeros({size}, TensorOptions{.dtype = dtype});
        pg->reduce_scatter(out, in, {.op = op}).wait();
        expect_values(out, [&](std::int64_t i) { return reduced(op, n, r * size + i); },
                      concat("reduce_scatter ", name(op), " of ", size, " per rank"));
      }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  for (DataType dtype : kNumericTypes)
    for (int root = 0; root < n; ++root) {
      Tensor t = make(37, dtype, [&](std::int64_t i) { return value(r, i); });
      pg->broadcast(t, root).wait();
      expect_values(t, [&](std::int64_t i) { return value(root, i); }, concat("broadcast from ", root));
    }
  Tensor base = make(20, kInt64, [&](std::int64_t i) { return value(r, i); }).view({4, 5});
  pg->broadcast(base.select(1, 2), n - 1).wait();  // a column: stride 5
  expect_values(base, [&](std::int64_t k) { return k % 5 == 2 ? value(n - 1, k) : value(r, k); },
                "strided broadcast");
}

TEST(Collectives, ReduceToEveryRoot) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  for (DataType dtype : {kInt32, kBFloat16, kFloat64})
    for (int root = 0; root < n; ++root) {
      Tensor t = make(37, dtype, [&](std::int64_t i) { return value(r, i); });
      pg->reduce(t, root, {.op = ReduceOp::Sum}).wait();
      expect_values(t, [&](std::int64_t i) { return r == root ? reduced(ReduceOp::Sum, n, i) : value(r, i); },
                    concat("reduce to ", root));
    }
}

TEST(Collectives, GatherAndScatter) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  for (int root = 0; root < n; ++root) {
    Tensor in = make(5, kFloat16, [&](std::int64_t i) { return value(r, i); });
    std::vector<Tensor> outs;
    if (r == root)
      for (int q = 0; q < n; ++q) outs.push_back(zeros({5}, TensorOptions{.dtype = kFloat16}));
    pg->gather(outs, in, root).wait();
    for (int q = 0; q < static_cast<int>(outs.size()); ++q)
      expect_values(outs[static_cast<std::size_t>(q)], [&](std::int64_t i) { return value(q, i); },
                    concat("gather to ", root, ", entry ", q));

    std::vector<Tensor> ins;
    if (r == root)
      for (int q = 0; q < n; ++q) ins.push_back(make(6, kInt16, [&](std::int64_t i) { return value(q, i) * 10; }));
    Tensor out = zeros({6}, TensorOptions{.dtype = kInt16});
    pg->scatter(out, ins, root).wait();
    expect_values(out, [&](std::int64_t i) { return value(r, i) * 10; }, concat("scatter from ", root));
  }
}

TEST(Collectives, AllToAllExchangesBlocks) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  for (std::int64_t block : {0, 1, 3}) {
    // Block j of rank r holds 100 r + 10 j + i.
    Tensor in = make(n * block, kInt32, [&](std::int64_t k) { return 100.0 * r + 10.0 * (k / std::max<std::int64_t>(block, 1)) + k % std::max<std::int64_t>(block, 1); });
    Tensor out = zeros({n * block}, TensorOptions{.dtype = kInt32});
    pg->all_to_all(out, in).wait();
    expect_values(out, [&](std::int64_t k) {
      const std::int64_t from = k / block, i = k % block;
      return 100.0 * static_cast<double>(from) + 10.0 * r + static_cast<double>(i);
    }, concat("all_to_all blocks of ", block));
  }
}

TEST(Collectives, BarrierAndEmptyOperands) {
  auto pg = world();
  pg->barrier().wait();
  Tensor empty2d = zeros({0, 4}, TensorOptions{.dtype = kFloat32});
  pg->all_reduce(empty2d).wait();
  pg->broadcast(empty2d, 0).wait();
  EXPECT_EQ(empty2d.numel(), 0);
}

// all_gather and reduce_scatter of 64 KiB and more take the rings: every dtype (and every op of
// reduce_scatter), an odd block length, `in` of reduce_scatter left as it was, an all_gather
// whose input is its own block of the output, and several rings of each kind in flight at once.
TEST(Collectives, AllGatherAndReduceScatterOfLargeTensorsTakeTheRings) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  constexpr std::int64_t kBlock = 70001;  // elements per rank: 64 KiB and more in all, in every dtype
  for (DataType dtype : kNumericTypes) {
    Tensor in = make(kBlock, dtype, [&](std::int64_t i) { return value(r, i); });
    Tensor out = zeros({n * kBlock}, TensorOptions{.dtype = dtype});
    pg->all_gather(out, in).wait();
    expect_values(out, [&](std::int64_t k) { return value(static_cast<int>(k / kBlock), k % kBlock); },
                  concat("large all_gather, ", dtype));
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product}) {
      if (op == ReduceOp::Avg && !is_floating_point(dtype)) continue;
      Tensor whole = make(n * kBlock, dtype, [&](std::int64_t k) { return value(r, k); });
      Tensor mine = zeros({kBlock}, TensorOptions{.dtype = dtype});
      pg->reduce_scatter(mine, whole, {.op = op}).wait();
      expect_values(mine, [&](std::int64_t i) { return reduced(op, n, r * kBlock + i); },
                    concat("large reduce_scatter ", name(op), ", ", dtype));
      expect_values(whole, [&](std::int64_t k) { return value(r, k); }, concat("reduce_scatter's input, ", dtype));
    }
  }
  Tensor own = make(n * kBlock, kFloat32, [&](std::int64_t k) { return k / kBlock == r ? value(r, k % kBlock) : -1.0; });
  pg->all_gather(own, own.narrow(0, r * kBlock, kBlock)).wait();
  expect_values(own, [&](std::int64_t k) { return value(static_cast<int>(k / kBlock), k % kBlock); },
                "all_gather of its own block");
  std::vector<Tensor> gathered, scattered;
  std::vector<Work> works;
  for (int k = 0; k < 3; ++k) {
    gathered.push_back(zeros({n * kBlock}, TensorOptions{.dtype = kFloat32}));
    works.push_back(pg->all_gather(gathered.back(), make(kBlock, kFloat32, [&](std::int64_t i) { return value(r + k, i); })));
    scattered.push_back(zeros({kBlock}, TensorOptions{.dtype = kFloat32}));
    works.push_back(pg->reduce_scatter(scattered.back(),
                                       make(n * kBlock, kFloat32, [&](std::int64_t i) { return value(r, i + k); })));
  }
  when_all(works).wait();
  for (int k = 0; k < 3; ++k) {
    expect_values(gathered[static_cast<std::size_t>(k)],
                  [&](std::int64_t i) { return value(static_cast<int>(i / kBlock) + k, i % kBlock); },
                  concat("all_gather ", k, " of 3 in flight"));
    expect_values(scattered[static_cast<std::size_t>(k)],
                  [&](std::int64_t i) { return reduced(ReduceOp::Sum, n, r * kBlock + i + k); },
                  concat("reduce_scatter ", k, " of 3 in flight"));
  }
}

TEST(Collectives, SixtyFourMebibytes) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  constexpr std::int64_t kElements = 16 << 20;  // float32: 64 MiB
  Tensor t = full({kElements}, static_cast<double>(r + 1), TensorOptions{.dtype = kFloat32});
  pg->all_reduce(t).wait();
  expect_values(t, [&](std::int64_t) { return n * (n + 1) / 2.0; }, "64 MiB all_reduce");
  Tensor b = full({kElements}, static_cast<double>(r), TensorOptions{.dtype = kFloat32});
  pg->broadcast(b, n - 1).wait();
  expect_values(b, [&](std::int64_t) { return n - 1.0; }, "64 MiB broadcast");
}

TEST(Collectives, BadOperandsNameTheProblem) {
  auto pg = world();
  const int n = pg->size();
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor f = zeros({4}, TensorOptions{.dtype = kFloat32});
  EXPECT_EQ(message([&] { pg->all_reduce(zeros({2}, TensorOptions{.dtype = kInt32}), {.op = ReduceOp::Avg}); }),
            "all_reduce: ReduceOp::Avg needs a floating-point tensor, got int32[2]");
  EXPECT_EQ(message([&] { pg->broadcast(f, n); }), concat("broadcast: root ", n, " is not a rank of a group of ", n));
  EXPECT_EQ(message([&] { pg->all_gather(zeros({4 * n + 1}, TensorOptions{.dtype = kFloat32}), f); }),
            concat("all_gather: expected an output of ", n, " ranks' blocks of [4]: shape [", 4 * n, "] or [", n,
                   ", 4], got [", 4 * n + 1, "]"));
  EXPECT_EQ(message([&] { pg->all_gather(zeros({4 * n}, TensorOptions{.dtype = kFloat64}), f); }),
            "all_gather: expected tensors of one dtype, got float64[" + std::to_string(4 * n) + "] and float32[4]");
  EXPECT_EQ(message([&] { pg->send(f, pg->rank()); }),
            concat("send: rank ", pg->rank(), " cannot exchange with itself"));
  EXPECT_EQ(message([&] { pg->all_reduce(Tensor()); }), "all_reduce: expected a defined tensor as tensor");
  // The group is still usable: nothing was launched.
  Tensor ok = ones({2}, TensorOptions{.dtype = kFloat32});
  pg->all_reduce(ok).wait();
  expect_values(ok, [&](std::int64_t) { return n; }, "all_reduce after rejected calls");
}

}  // namespace
}  // namespace infini::parallel::test::collectives_test
