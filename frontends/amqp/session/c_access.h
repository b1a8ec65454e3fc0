#pragma once
// The C objects behind Proton C++ wrappers. Proton C++ 0.37 keeps its
// unwrap() in a private header, yet some protocol facts are only in the C
// objects (settle modes, max-message-size, partial deliveries, SASL).
// proton::returned<U> is a friend of every wrapper, so one specialisation
// of it, for a tag type of ours, is the accessor.
#include <proton/connection.h>
#include <proton/connection.hpp>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/link.hpp>
#include <proton/returned.hpp>
#include <proton/transfer.hpp>
#include <proton/transport.h>
#include <proton/transport.hpp>

namespace estuary::amqp {
struct CObjectTag {};
}  // namespace estuary::amqp

template <>
class proton::returned<estuary::amqp::CObjectTag> {
 public:
  static pn_link_t* Of(const proton::link& link) {
    return static_cast<const internal::object<pn_link_t>&>(link).pn_object();
  }
  static pn_delivery_t* Of(const proton::transfer& transfer) {
    return static_cast<const internal::object<pn_delivery_t>&>(transfer).pn_object();
  }
  static pn_connection_t* Of(const proton::connection& connection) {
    return static_cast<const internal::object<pn_connection_t>&>(connection).pn_object();
  }
  static pn_transport_t* Of(const proton::transport& transport) {
    return static_cast<const internal::object<pn_transport_t>&>(transport).pn_object();
  }
};

namespace estuary::amqp {
using CObject = proton::returned<CObjectTag>;
}  // namespace estuary::amqp
