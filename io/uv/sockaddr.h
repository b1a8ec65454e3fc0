#pragma once
// Internal to io/uv: endpoints to and from socket addresses.
#include <sys/socket.h>

#include <optional>
#include <string>

#include "io/uv/tcp.h"

namespace estuary::io::detail {

// A numeric host ("127.0.0.1", "::1") or "localhost" (127.0.0.1) as a
// socket address; nullopt when the host is a name that needs resolving.
std::optional<sockaddr_storage> NumericAddress(const Endpoint& endpoint);

// NumericAddress, else a blocking getaddrinfo (start-up paths only).
Expected<sockaddr_storage, std::string> ResolveBlocking(const Endpoint& endpoint);

socklen_t AddressLength(const sockaddr_storage& address);

// "ip:port", or "[ip]:port" for IPv6; "" for an unknown family.
std::string FormatAddress(const sockaddr* address);

}  // namespace estuary::io::detail
