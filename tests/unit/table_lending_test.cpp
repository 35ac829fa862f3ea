// TableLending (vmm/table_lending.h): which earlier operations of a stream
// lend to a consumer, by the small cells both named.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "vmm/table_lending.h"

namespace vgpumem::vmm {
namespace {

using Names = TableLending::Names;

// An operation's names: `cells` are small cells (words into small
// allocations), `words` every paged word it named (cells included).
Names names(std::initializer_list<std::uint64_t> cells, std::initializer_list<std::uint64_t> words = {}) {
  Names n;
  for (const std::uint64_t w : words) n.add_word(w);
  for (const std::uint64_t c : cells) {
    n.add_word(c);
    n.add_small_cell(c);
  }
  return n;
}

std::set<std::uint64_t> lent(const TableLending& lending, unsigned stream, std::uint64_t sequence, const Names& n,
                             std::size_t* lenders = nullptr) {
  std::set<std::uint64_t> out;
  const std::size_t count = lending.lend(stream, sequence, n, [&](std::uint64_t word) { out.insert(word); });
  if (lenders != nullptr) *lenders = count;
  return out;
}

constexpr std::uint64_t kTable = 0x7000'0000'0000, kA = 0x7100'0000'0000, kB = 0x7200'0000'0000;

TEST(TableLending, AConsumerNamingTheProducersCellIsLentEveryWordItNamed) {
  TableLending lending(8);
  lending.keep(0, 10, names({kTable}, {kA, kB}));
  EXPECT_EQ(lent(lending, 0, 12, names({kTable + 100})), (std::set<std::uint64_t>{kTable, kA, kB}))
      << "the same 512-byte cell";
  EXPECT_TRUE(lent(lending, 0, 12, names({kTable + 512})).empty()) << "the next cell";
  EXPECT_TRUE(lent(lending, 0, 12, names({}, {kTable})).empty()) << "named, but not as a small cell";
}

TEST(TableLending, OnlyOperationsAtMostKBeforeOnTheSameStreamLend) {
  TableLending lending(3);
  lending.keep(5, 10, names({kTable}, {kA}));
  EXPECT_FALSE(lent(lending, 5, 13, names({kTable})).empty()) << "3 operations on";
  EXPECT_TRUE(lent(lending, 5, 14, names({kTable})).empty()) << "4 operations on";
  EXPECT_TRUE(lent(lending, 6, 11, names({kTable})).empty()) << "another stream";
  EXPECT_TRUE(lent(lending, 5, 10, names({kTable})).empty()) << "itself";
  EXPECT_TRUE(lent(lending, 5, 9, names({kTable})).empty()) << "a later operation lends nothing to an earlier";
}

TEST(TableLending, AWindowOfNoneLendsAndKeepsNothing) {
  TableLending lending(0);
  lending.keep(0, 1, names({kTable}, {kA}));
  EXPECT_TRUE(lent(lending, 0, 2, names({kTable})).empty());
}

// Each operation naming a small cell takes a slot: the last kSlots are kept.
TEST(TableLending, TheLastSlotsOperationsNamingASmallCellAreKept) {
  TableLending lending(1000);
  const std::uint64_t first = 1;
  for (std::uint64_t i = 0; i < TableLending::kSlots + 1; ++i) {
    lending.keep(0, first + i, names({kTable + i * 512}, {kA + i}));
  }
  const std::uint64_t now = first + TableLending::kSlots + 1;
  EXPECT_TRUE(lent(lending, 0, now, names({kTable})).empty()) << "the oldest was overwritten";
  EXPECT_EQ(lent(lending, 0, now, names({kTable + 512})), (std::set<std::uint64_t>{kA + 1}))
      << "the consumer's own word is its own already";
  lending.keep(0, now, names({}, {kA}));  // names no small cell: takes no slot
  EXPECT_FALSE(lent(lending, 0, now + 1, names({kTable + 512})).empty());
}

// An operation repeated over the same buffers renews the slot of the last
// one instead of taking another: a producer before a run of repeats longer
// than the ring still lends, and the repeats lend as the newest of them.
TEST(TableLending, ARepeatedOperationRenewsItsSlotAndKeepsTheOlderOnes) {
  TableLending lending(100);
  lending.keep(0, 1, names({kTable}, {kA}));
  for (std::uint64_t i = 0; i < 3 * TableLending::kSlots; ++i) lending.keep(0, 2 + i, names({kTable + 512}, {kB}));
  const std::uint64_t now = 2 + 3 * TableLending::kSlots;
  std::size_t lenders = 0;
  EXPECT_EQ(lent(lending, 0, now, names({kTable}), &lenders), (std::set<std::uint64_t>{kA}))
      << "the producer before the repeats";
  EXPECT_EQ(lenders, 1u);
  EXPECT_EQ(lent(lending, 0, now, names({kTable + 512 + 8}), &lenders), (std::set<std::uint64_t>{kTable + 512, kB}));
  EXPECT_EQ(lenders, 1u) << "the repeats took one slot";
  TableLending narrow(3);  // the renewed number decides the window
  narrow.keep(0, 1, names({kTable}, {kA}));
  narrow.keep(0, 10, names({kTable}, {kA}));
  EXPECT_FALSE(lent(narrow, 0, 13, names({kTable + 8})).empty()) << "3 operations after the repeat";
  narrow.keep(0, 11, names({kTable}, {kA, kB}));  // not the same: a slot of its own
  EXPECT_EQ(lent(narrow, 0, 13, names({kTable + 8}), &lenders), (std::set<std::uint64_t>{kTable, kA, kB}));
  EXPECT_EQ(lenders, 2u);
}

// Past kCells only the mask is known: a consumer whose cells hash where the
// producer's did is lent (more than needed, never less).
TEST(TableLending, PastTheCellsKeptTheMaskDecidesAndErrsTowardLending) {
  TableLending lending(8);
  Names producer = names({}, {kA});
  for (std::uint64_t i = 0; i < TableLending::kCells + 3; ++i) producer.add_small_cell(kTable + i * 512);
  lending.keep(0, 1, producer);
  for (std::uint64_t i = 0; i < TableLending::kCells + 3; ++i) {
    EXPECT_TRUE(lent(lending, 0, 2, names({kTable + i * 512})).count(kA)) << "cell " << i;
  }
}

// A producer whose words do not fit a slot is not kept (the pager stamps it
// with the blanket grace instead), nor is one that named every unit.
TEST(TableLending, AnOperationWhoseWordsDoNotFitIsNotKept) {
  TableLending lending(8);
  Names wide = names({kTable});
  for (std::uint64_t i = 0; i < TableLending::kWords; ++i) wide.add_word(kA + i);
  EXPECT_TRUE(wide.overflowed());
  lending.keep(0, 1, wide);
  Names everything = names({kTable + 512});
  everything.named_everything = true;
  EXPECT_TRUE(everything.overflowed());
  lending.keep(0, 2, everything);
  EXPECT_TRUE(lent(lending, 0, 3, names({kTable, kTable + 512})).empty());
}

// A consumer that names a producer's words itself is lent nothing more and
// looks nothing up: a chain of launches over the same small buffers.
TEST(TableLending, WordsTheConsumerNamesItselfAreNotLent) {
  TableLending lending(8);
  lending.keep(0, 1, names({kTable}, {kA}));
  lending.keep(0, 2, names({kTable}, {kA, kB}));
  std::size_t lenders = 0;
  EXPECT_TRUE(lent(lending, 0, 3, names({kTable}, {kA, kB}), &lenders).empty());
  EXPECT_EQ(lenders, 0u);
  EXPECT_EQ(lent(lending, 0, 3, names({kTable}, {kA}), &lenders), (std::set<std::uint64_t>{kB}));
  EXPECT_EQ(lenders, 1u) << "only the producer with a word the consumer does not name";
  // Past kWords the consumer's own words are not all known: lent, as before.
  Names wide = names({kTable});
  for (std::uint64_t i = 0; i < TableLending::kWords; ++i) wide.add_word(kA + 100 + i);
  wide.add_word(kB);
  EXPECT_TRUE(lent(lending, 0, 3, wide).count(kB));
}

TEST(TableLending, EveryLenderInTheWindowLends) {
  TableLending lending(8);
  lending.keep(0, 1, names({kTable}, {kA}));
  lending.keep(0, 2, names({kTable}, {kB}));
  std::size_t lenders = 0;
  // The consumer names another word of the table's cell (a word it names
  // itself is its own already).
  EXPECT_EQ(lent(lending, 0, 3, names({kTable + 8}), &lenders), (std::set<std::uint64_t>{kTable, kA, kB}));
  EXPECT_EQ(lenders, 2u);
}

// Threads keeping and lending on one stream at once (a program may launch
// on a stream from several threads): every lend reads a whole slot, never
// a mix of two operations' names. Run under ThreadSanitizer too.
TEST(TableLendingConcurrent, ReadersSeeWholeSlotsWhileWritersKeep) {
  TableLending lending(1u << 20);
  std::atomic<std::uint64_t> sequence{1};
  std::atomic<bool> mixed{false};
  auto writer = [&] {
    for (int i = 0; i < 4000; ++i) {
      const std::uint64_t n = sequence.fetch_add(1);
      // Each operation's words all carry its number: a mix shows.
      lending.keep(0, n, names({kTable}, {kA + n, kB + n}));
    }
  };
  auto reader = [&] {
    for (int i = 0; i < 4000; ++i) {
      // A slot lends its words in the order they were named: kA + n,
      // kB + n, the table.
      std::vector<std::uint64_t> seen;
      lending.lend(0, sequence.load() + 1, names({kTable + 8}), [&](std::uint64_t word) { seen.push_back(word); });
      if (seen.size() % 3 != 0) mixed = true;
      for (std::size_t w = 0; w + 2 < seen.size(); w += 3) {
        if (seen[w] - kA != seen[w + 1] - kB || seen[w + 2] != kTable) mixed = true;
      }
    }
  };
  std::thread a(writer), b(writer), c(reader), d(reader);
  a.join();
  b.join();
  c.join();
  d.join();
  EXPECT_FALSE(mixed.load());
}

}  // namespace
}  // namespace vgpumem::vmm
