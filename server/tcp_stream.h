#pragma once
// TcpStream: io::Stream over an io::TcpConnection, for frontend sessions.
#include <memory>
#include <string>
#include <utility>

#include "io/stream.h"
#include "io/uv/tcp.h"

namespace estuary::server {

class TcpStream final : public io::Stream {
 public:
  explicit TcpStream(std::shared_ptr<io::TcpConnection> tcp) : tcp_(std::move(tcp)) {}
  std::string& output() override { return tcp_->output_buffer(); }
  void Flush() override { tcp_->MarkDirty(); }
  size_t queued_bytes() const override { return tcp_->queued_bytes(); }
  void Close() override { tcp_->Close(); }
  void PauseReading() override { tcp_->StopReading(); }
  void ResumeReading() override { tcp_->StartReading(); }
  std::string peer_address() const override {
    return client_address_.empty() ? tcp_->peer_address() : client_address_;
  }
  // The client behind a balancer (from its PROXY v2 header).
  void set_client_address(std::string address) { client_address_ = std::move(address); }
  const std::string& client_address() const { return client_address_; }
  io::TcpConnection& tcp() { return *tcp_; }

 private:
  std::shared_ptr<io::TcpConnection> tcp_;
  std::string client_address_;
};

}  // namespace estuary::server
