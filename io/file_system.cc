#include "io/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace estuary::io {
namespace {

FsError ErrnoError(const std::string& what, const std::string& path, int err) {
  FsErrc code = FsErrc::kIo;
  if (err == ENOENT) code = FsErrc::kNotFound;
  if (err == ENOSPC || err == EDQUOT) code = FsErrc::kNoSpace;
  if (err == EINVAL || err == EBADF) code = FsErrc::kInvalid;
  return FsError{code, what + " " + path + ": " + std::strerror(err)};
}

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path, bool writable, bool positional = false)
      : fd_(fd), path_(std::move(path)), writable_(writable), positional_(positional) {}
  ~PosixFile() override { ::close(fd_); }

  FsStatus Append(std::string_view data) override {
    if (!writable_) return MakeError(FsError{FsErrc::kInvalid, "read-only " + path_});
    // Without O_APPEND (OpenWrite) the end must be sought first.
    if (positional_ && ::lseek(fd_, 0, SEEK_END) < 0) {
      return MakeError(ErrnoError("lseek", path_, errno));
    }
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return MakeError(ErrnoError("write", path_, errno));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return {};
  }

  FsResult<std::string> ReadAt(uint64_t offset, size_t n) const override {
    std::string out(n, '\0');
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, out.data() + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return MakeError(ErrnoError("pread", path_, errno));
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    out.resize(done);
    return out;
  }

  FsStatus WriteAt(uint64_t offset, std::string_view data) override {
    // pwrite on an O_APPEND descriptor appends on Linux whatever the offset.
    if (!writable_ || !positional_) {
      return MakeError(FsError{FsErrc::kInvalid, "not opened for positional writes: " + path_});
    }
    while (!data.empty()) {
      ssize_t n = ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return MakeError(ErrnoError("pwrite", path_, errno));
      }
      data.remove_prefix(static_cast<size_t>(n));
      offset += static_cast<uint64_t>(n);
    }
    return {};
  }

  FsStatus Sync() override {
    if (::fdatasync(fd_) != 0) return MakeError(ErrnoError("fdatasync", path_, errno));
    return {};
  }

  FsResult<uint64_t> Size() const override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return MakeError(ErrnoError("fstat", path_, errno));
    return static_cast<uint64_t>(st.st_size);
  }

  FsStatus Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return MakeError(ErrnoError("ftruncate", path_, errno));
    }
    return {};
  }

 private:
  int fd_;
  std::string path_;
  bool writable_;
  bool positional_;
};

std::string ParentDir(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace

// ---------------------------------------------------------------- Posix

FsResult<std::unique_ptr<File>> PosixFileSystem::OpenAppend(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return MakeError(ErrnoError("open", path, errno));
  return std::unique_ptr<File>(new PosixFile(fd, path, true));
}

FsResult<std::unique_ptr<File>> PosixFileSystem::OpenWrite(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return MakeError(ErrnoError("open", path, errno));
  return std::unique_ptr<File>(new PosixFile(fd, path, true, true));
}

FsResult<std::unique_ptr<File>> PosixFileSystem::OpenRead(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError(ErrnoError("open", path, errno));
  return std::unique_ptr<File>(new PosixFile(fd, path, false));
}

FsStatus PosixFileSystem::Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return MakeError(ErrnoError("rename", from, errno));
  return {};
}

FsStatus PosixFileSystem::Remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return MakeError(ErrnoError("unlink", path, errno));
  return {};
}

FsResult<std::vector<std::string>> PosixFileSystem::ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return MakeError(ErrnoError("opendir", dir, errno));
  std::vector<std::string> names;
  while (struct dirent* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

FsResult<uint64_t> PosixFileSystem::FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return MakeError(ErrnoError("stat", path, errno));
  return static_cast<uint64_t>(st.st_size);
}

FsStatus PosixFileSystem::CreateDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return MakeError(ErrnoError("mkdir", dir, errno));
  }
  return {};
}

FsStatus PosixFileSystem::SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return MakeError(ErrnoError("open", dir, errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return MakeError(ErrnoError("fsync", dir, err));
  return {};
}

bool PosixFileSystem::Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

PosixFileSystem& PosixFileSystem::Instance() {
  static PosixFileSystem fs;
  return fs;
}

// ---------------------------------------------------------------- Sim

class SimFileSystem::SimFile final : public File {
 public:
  SimFile(SimFileSystem* fs, std::shared_ptr<Inode> inode, std::string path, bool writable)
      : fs_(fs), inode_(std::move(inode)), path_(std::move(path)), writable_(writable),
        generation_(fs->generation_) {}

  FsStatus Append(std::string_view data) override {
    if (auto s = Check(true); !s) return s;
    if (!writable_) return MakeError(FsError{FsErrc::kInvalid, "read-only " + path_});
    if (auto s = fs_->CheckSpace(data.size()); !s) return s;
    inode_->data.append(data);
    return {};
  }

  FsResult<std::string> ReadAt(uint64_t offset, size_t n) const override {
    if (generation_ != fs_->generation_ || fs_->dead()) {
      return MakeError(FsError{FsErrc::kIo, "process is dead: " + path_});
    }
    if (offset >= inode_->data.size()) return std::string();
    return inode_->data.substr(offset, n);
  }

  FsStatus WriteAt(uint64_t offset, std::string_view data) override {
    if (auto s = Check(true); !s) return s;
    if (!writable_) return MakeError(FsError{FsErrc::kInvalid, "read-only " + path_});
    uint64_t end = offset + data.size();
    if (end > inode_->data.size()) {
      if (auto s = fs_->CheckSpace(end - inode_->data.size()); !s) return s;
      inode_->data.resize(end, '\0');  // a gap reads as zeros, as a hole does
    }
    inode_->data.replace(offset, data.size(), data);
    inode_->overwritten = true;
    return {};
  }

  FsStatus Sync() override {
    if (auto s = Check(true); !s) return s;
    inode_->synced = inode_->data;
    inode_->overwritten = false;
    ++fs_->sync_count_;
    return {};
  }

  FsResult<uint64_t> Size() const override {
    if (generation_ != fs_->generation_) return MakeError(FsError{FsErrc::kIo, "stale " + path_});
    return inode_->data.size();
  }

  FsStatus Truncate(uint64_t size) override {
    if (auto s = Check(true); !s) return s;
    if (size < inode_->data.size()) inode_->data.resize(size);
    return {};
  }

 private:
  FsStatus Check(bool mutating) {
    if (generation_ != fs_->generation_) {
      return MakeError(FsError{FsErrc::kIo, "file from before a crash: " + path_});
    }
    return fs_->CheckAlive(mutating);
  }

  SimFileSystem* fs_;
  std::shared_ptr<Inode> inode_;
  std::string path_;
  bool writable_;
  uint64_t generation_;
};

SimFileSystem::SimFileSystem(uint64_t seed) : random_(seed) { dirs_.insert(""); }
SimFileSystem::~SimFileSystem() = default;

FsStatus SimFileSystem::CheckAlive(bool mutating) {
  if (ops_until_dead_ == 0) return MakeError(FsError{FsErrc::kIo, "process is dead"});
  if (mutating && ops_until_dead_ > 0) --ops_until_dead_;
  return {};
}

FsStatus SimFileSystem::CheckSpace(size_t extra) const {
  if (capacity_ < 0) return {};
  uint64_t used = 0;
  std::set<const Inode*> seen;
  for (const auto& [name, inode] : names_) {
    if (seen.insert(inode.get()).second) used += inode->data.size();
  }
  if (used + extra > static_cast<uint64_t>(capacity_)) {
    return MakeError(FsError{FsErrc::kNoSpace, "no space left on device"});
  }
  return {};
}

std::shared_ptr<SimFileSystem::Inode> SimFileSystem::Find(const std::string& path) const {
  auto it = names_.find(path);
  return it == names_.end() ? nullptr : it->second;
}

FsResult<std::unique_ptr<File>> SimFileSystem::OpenAppend(const std::string& path) {
  auto inode = Find(path);
  if (!inode) {
    if (auto s = CheckAlive(true); !s) return MakeError(s.error());
    if (!dirs_.count(ParentDir(path))) {
      return MakeError(FsError{FsErrc::kNotFound, "no directory for " + path});
    }
    inode = std::make_shared<Inode>();
    names_[path] = inode;
  } else if (auto s = CheckAlive(false); !s) {
    return MakeError(s.error());
  }
  return std::unique_ptr<File>(new SimFile(this, inode, path, true));
}

FsResult<std::unique_ptr<File>> SimFileSystem::OpenWrite(const std::string& path) {
  return OpenAppend(path);  // SimFile writes by offset and by append alike
}

FsResult<std::unique_ptr<File>> SimFileSystem::OpenRead(const std::string& path) {
  if (auto s = CheckAlive(false); !s) return MakeError(s.error());
  auto inode = Find(path);
  if (!inode) return MakeError(FsError{FsErrc::kNotFound, "no such file " + path});
  return std::unique_ptr<File>(new SimFile(this, inode, path, false));
}

FsStatus SimFileSystem::Rename(const std::string& from, const std::string& to) {
  if (auto s = CheckAlive(true); !s) return s;
  auto inode = Find(from);
  if (!inode) return MakeError(FsError{FsErrc::kNotFound, "rename: no such file " + from});
  names_.erase(from);
  names_[to] = inode;
  return {};
}

FsStatus SimFileSystem::Remove(const std::string& path) {
  if (auto s = CheckAlive(true); !s) return s;
  if (names_.erase(path) == 0) return MakeError(FsError{FsErrc::kNotFound, "remove: " + path});
  return {};
}

FsResult<std::vector<std::string>> SimFileSystem::ListDir(const std::string& dir) {
  if (auto s = CheckAlive(false); !s) return MakeError(s.error());
  if (!dirs_.count(dir)) return MakeError(FsError{FsErrc::kNotFound, "no directory " + dir});
  std::vector<std::string> out;
  for (const auto& [name, inode] : names_) {
    if (ParentDir(name) == dir) out.push_back(name.substr(dir.empty() ? 0 : dir.size() + 1));
  }
  return out;
}

FsResult<uint64_t> SimFileSystem::FileSize(const std::string& path) {
  auto inode = Find(path);
  if (!inode) return MakeError(FsError{FsErrc::kNotFound, "no such file " + path});
  return inode->data.size();
}

FsStatus SimFileSystem::CreateDir(const std::string& dir) {
  if (auto s = CheckAlive(true); !s) return s;
  dirs_.insert(dir);  // directories themselves are durable at once
  return {};
}

FsStatus SimFileSystem::SyncDir(const std::string& dir) {
  if (auto s = CheckAlive(true); !s) return s;
  for (auto it = durable_names_.begin(); it != durable_names_.end();) {
    it = ParentDir(it->first) == dir ? durable_names_.erase(it) : std::next(it);
  }
  for (const auto& [name, inode] : names_) {
    if (ParentDir(name) == dir) durable_names_[name] = inode;
  }
  return {};
}

bool SimFileSystem::Exists(const std::string& path) { return names_.count(path) > 0; }

void SimFileSystem::Crash(bool torn_tail) {
  names_ = durable_names_;
  std::set<Inode*> done;
  for (auto& [name, inode] : names_) {
    if (!done.insert(inode.get()).second) continue;
    std::string& data = inode->data;
    const std::string& synced = inode->synced;
    if (inode->overwritten) {
      inode->overwritten = false;
      if (torn_tail && data.size() >= synced.size()) {
        // Keep a random prefix of the changed range [first, last], where
        // bytes past the synced length count as changed only if not zero
        // (an extension by zeros is invisible to a reader).
        auto old_byte = [&](size_t i) { return i < synced.size() ? synced[i] : '\0'; };
        size_t first = 0;
        while (first < data.size() && data[first] == old_byte(first)) ++first;
        size_t end = data.size();
        while (end > first && data[end - 1] == old_byte(end - 1)) --end;
        uint64_t keep = std::uniform_int_distribution<uint64_t>(0, end - first)(random_);
        size_t cut = first + keep;
        if (cut < end) {
          for (size_t i = cut; i < data.size(); ++i) data[i] = old_byte(i);
          data.resize(std::max<size_t>(cut, synced.size()));
        }
      } else {
        data = synced;
      }
      inode->synced = data;
      continue;
    }
    bool extends = data.size() > synced.size() && data.compare(0, synced.size(), synced) == 0;
    if (torn_tail && extends) {
      uint64_t extra = data.size() - synced.size();
      uint64_t keep = std::uniform_int_distribution<uint64_t>(0, extra)(random_);
      data.resize(synced.size() + keep);
    } else {
      data = synced;
    }
    inode->synced = data;
  }
  ++generation_;
  ops_until_dead_ = -1;
}

bool SimFileSystem::FlipBit(const std::string& path, uint64_t offset, int bit) {
  auto inode = Find(path);
  if (!inode || offset >= inode->data.size() || bit < 0 || bit > 7) return false;
  inode->data[offset] = static_cast<char>(inode->data[offset] ^ (1 << bit));
  if (offset < inode->synced.size()) {
    inode->synced[offset] = static_cast<char>(inode->synced[offset] ^ (1 << bit));
  }
  return true;
}

std::string SimFileSystem::Contents(const std::string& path) const {
  auto inode = Find(path);
  return inode ? inode->data : std::string();
}

}  // namespace estuary::io
