// The mirror channels a ShapedTransport sends through, as the rest of geops
// sees them: a factory of wan::PeerChannel, one MirrorChannel
// (thrift/mirror_channel.h, over Thrift) per peer and lane. This header
// exposes no Thrift type.
#ifndef GEOPS_THRIFT_MIRROR_CHANNEL_FACTORY_H_
#define GEOPS_THRIFT_MIRROR_CHANNEL_FACTORY_H_

#include "thrift/mirror_address_book.h"
#include "thrift/mirror_identity.h"
#include "thrift/thrift_options.h"
#include "wan/link/peer_channel.h"

namespace geops::rpc {

// `book` must outlive the channels; until a peer's address is in it, every
// call of its channel answers Unavailable, which the sender retries.
wan::PeerChannelFactory MirrorChannelFactory(const MirrorAddressBook* book, MirrorIdentity self,
                                             ThriftClientOptions options);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_CHANNEL_FACTORY_H_
