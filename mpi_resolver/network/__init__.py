"""Ports and addresses: fixed and 'auto' ports and the ones in use (ports, port_sockets),
proxy variables that would carry gRPC's traffic (proxies), a node's own addresses
(host_addresses), name lookups (address_lookup), and naming nodes by address, agreed over
the exchange (address_names).

May import core, placement, options, launch and exchange (address_names agrees over the
exchange). Imported by resolve/, rehearsal/ and cli/, never by the parts below it.
"""
