#include "cluster-core/raft/log.h"

#include <algorithm>

#include "base/check.h"

namespace estuary::raft {

RaftLog::RaftLog() : snapshot_(std::make_shared<Snapshot>()) {}

void RaftLog::Restore(Snapshot snapshot, std::vector<Entry> entries) {
  snapshot_ = std::make_shared<Snapshot>(std::move(snapshot));
  entries_ = std::move(entries);
  for (size_t i = 0; i < entries_.size(); ++i) {
    ESTUARY_CHECK(entries_[i].index == snapshot_->index + 1 + i);
  }
  persisted_ = LastIndex();
  RecomputeConfig();
}

Term RaftLog::LastTerm() const {
  return entries_.empty() ? snapshot_->term : entries_.back().term;
}

uint64_t RaftLog::LastTimestamp() const {
  return entries_.empty() ? snapshot_->timestamp : entries_.back().timestamp;
}

uint64_t RaftLog::TimestampAt(Index index) const {
  return index == snapshot_->index ? snapshot_->timestamp : At(index).timestamp;
}

std::optional<Term> RaftLog::TermAt(Index index) const {
  if (index == snapshot_->index) return snapshot_->term;
  if (index < snapshot_->index || index > LastIndex()) return std::nullopt;
  return At(index).term;
}

const Entry& RaftLog::At(Index index) const {
  ESTUARY_CHECK(index > snapshot_->index && index <= LastIndex());
  return entries_[index - snapshot_->index - 1];
}

bool RaftLog::IsUpToDateWith(Index last_index, Term last_term) const {
  return last_term > LastTerm() || (last_term == LastTerm() && last_index >= LastIndex());
}

Index RaftLog::FindHint(Index index, Term term) const {
  Index i = std::min(index, LastIndex());
  while (i > snapshot_->index && At(i).term > term) --i;
  return i;
}

void RaftLog::Append(Entry entry) {
  ESTUARY_CHECK(entry.index == LastIndex() + 1);
  ESTUARY_CHECK(entry.term >= LastTerm());
  if (entry.type == EntryType::kConfig) {
    config_ = DecodeConfig(entry.data);
    config_index_ = entry.index;
  }
  entries_.push_back(std::move(entry));
}

std::vector<Entry> RaftLog::Merge(const std::vector<Entry>& entries) {
  size_t i = 0;
  // Skip what is compacted or already present with the same term.
  while (i < entries.size() && (entries[i].index <= snapshot_->index ||
                                (entries[i].index <= LastIndex() &&
                                 At(entries[i].index).term == entries[i].term))) {
    ++i;
  }
  if (i == entries.size()) return {};
  const Index first_new = entries[i].index;
  if (first_new <= LastIndex()) {  // conflict: drop our suffix
    entries_.resize(first_new - snapshot_->index - 1);
    persisted_ = std::min(persisted_, first_new - 1);
    RecomputeConfig();
  }
  std::vector<Entry> written(entries.begin() + static_cast<std::ptrdiff_t>(i), entries.end());
  for (const Entry& entry : written) Append(entry);
  return written;
}

std::vector<Entry> RaftLog::Slice(Index from, Index to, size_t max_entries,
                                  size_t max_bytes) const {
  std::vector<Entry> out;
  size_t bytes = 0;
  for (Index i = from; i <= to && out.size() < max_entries; ++i) {
    const Entry& entry = At(i);
    bytes += entry.data.size();
    if (!out.empty() && bytes > max_bytes) break;
    out.push_back(entry);
  }
  return out;
}

void RaftLog::Compact(Snapshot snapshot) {
  ESTUARY_CHECK(snapshot.index > snapshot_->index && snapshot.index <= LastIndex());
  ESTUARY_CHECK(TermAt(snapshot.index) == snapshot.term);
  const auto drop = static_cast<std::ptrdiff_t>(snapshot.index - snapshot_->index);
  entries_.erase(entries_.begin(), entries_.begin() + drop);
  snapshot_ = std::make_shared<Snapshot>(std::move(snapshot));
  persisted_ = std::max(persisted_, snapshot_->index);
  RecomputeConfig();
}

Config RaftLog::ConfigAt(Index index) const {
  for (Index i = std::min(index, LastIndex()); i > snapshot_->index; --i) {
    if (At(i).type == EntryType::kConfig) return DecodeConfig(At(i).data);
  }
  return snapshot_->config;
}

// Keeping a matching suffix would save a few appends but makes storage
// reason about which entries survive; discarding is simpler and safe.
void RaftLog::Install(Snapshot snapshot) {
  entries_.clear();
  snapshot_ = std::make_shared<Snapshot>(std::move(snapshot));
  persisted_ = snapshot_->index;
  RecomputeConfig();
}

void RaftLog::MarkPersisted(Index index, Term term) {
  if (index > persisted_ && Matches(index, term)) persisted_ = index;
}

void RaftLog::RecomputeConfig() {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->type == EntryType::kConfig) {
      config_ = DecodeConfig(it->data);
      config_index_ = it->index;
      return;
    }
  }
  config_ = snapshot_->config;
  config_index_ = snapshot_->index;
}

}  // namespace estuary::raft
