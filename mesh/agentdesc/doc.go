// Package agentdesc is the mesh agent's description of itself, the document peers read
// to learn its rails, and the pairing of local rails with a peer's (Pair).
//
// The document (version 1.1; docs/mesh.md has an example):
//
//	{"version": "1.1", "name": "node1", "instance": "3f9c2a61d07b8e45", "group": "tor-a", "gorping_version": "v1.4.0",
//	 "responder_port": 7174,
//	 "rails": [{"device": "mlx5_0", "port": 1, "netdev": "ens1f0np0",
//	            "link_layer": "Ethernet", "active_mtu": 4096,
//	            "addresses": ["10.0.1.5/24", "fd00:1::5/64"],
//	            "gids": [{"index": 3, "gid": "::ffff:10.0.1.5", "type": "RoCE v2"},
//	                     {"index": 5, "gid": "fd00:1::5", "type": "RoCE v2"}]}]}
//
// 1.1 added "instance", an ID the agent draws at start: agents of one name (cloned
// hosts, an unset host name) tell each other apart by it. A 1.0 document has none; its
// agent is known by its name and GIDs (Description.SameAgent).
//
// Versioning: "version" is MAJOR.MINOR. A reader reads every minor version of its major
// version and refuses any other major version, saying so. A minor version only adds: new
// optional fields, and new values of link_layer and of a GID's type; the meaning of
// every existing field stays. So a document of a newer minor version than the reader's
// may carry fields the reader does not know, which it ignores, and values it does not
// know, which it keeps and does not use for pairing; a document of the reader's minor
// version or older may not (an unknown field or value there is an error: a peer that
// claims a version must keep to it). A change of meaning takes a new major version.
//
// Bounds: a document is at most MaxSize bytes, with at most MaxRails rails, MaxAddresses
// addresses and MaxGIDs GIDs a rail, names of bounded length in visible ASCII. Unmarshal
// checks every field and names the first bad one; a bad document from a peer is an
// error, never a panic or an allocation beyond its size.
package agentdesc
