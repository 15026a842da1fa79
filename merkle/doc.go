// Package merkle is an authenticated map from 32-byte keys to 32-byte value
// hashes: a binary Patricia (radix, path-compressed) Merkle trie with
// Keccak-256, maintained incrementally. TREE.md specifies the hashing and
// the proof encoding precisely enough to reimplement them; testdata/
// vectors.json holds test vectors.
//
// # Shape
//
// A key is a path of 256 bits, bit 0 being the most significant bit of its
// first byte (so the leaves, left to right, are in byte-wise key order).
// Every internal node branches on one bit, with the keys whose bit is 0 on
// its left and 1 on its right, and has two children; each leaf sits at the
// shortest prefix that distinguishes its key from every other key. The
// shape is therefore a function of the set of keys alone: the root does not
// depend on the order of the operations that built the set, on memory
// layout, or on anything else. A node restored from a snapshot and one that
// replayed every change compute the same root.
//
// # Hashing
//
//	leaf     = keccak256(0x00 || key[32] || valueHash[32])
//	internal = keccak256(0x01 || bit[1] || left[32] || right[32])
//	empty tree's root = 32 zero bytes
//
// The tags keep leaves and internal nodes apart; leaves commit to their full
// key, so two different sets can only have the same root through a
// Keccak-256 collision. The internal node also commits to the bit it
// branches on: that is what lets a proof of absence be a single path (the
// verifier must trust which bits the path branched on to know the search
// for the key really ends at the leaf the proof shows). The preimages fit
// one Keccak block, so every node costs exactly one permutation.
//
// # Cost
//
// Set and Delete hash nothing: they update the shape and mark the path to
// the changed leaf stale. Root rehashes each stale node once, so k changes
// followed by one Root cost one Keccak-256 per distinct node on the union
// of the k paths (about k·log2(N/k) + k), never proportional to N; Hashes
// counts the calls. Lookups, Set and Delete walk one path: O(depth), about
// log2 N for keys that are hashes.
//
// # Proofs
//
// Prove returns a proof that a key is present with its value hash (Kind
// Present), that it is absent (Absent: the path the search for the key
// follows, and the other leaf it ends at), or that the tree is empty
// (Empty). Verify checks one against a root with nothing else. Proofs
// encode to version 1 of a compact, length-checked binary format
// (MarshalBinary, UnmarshalBinary).
//
// # Memory
//
// Nodes live in two slabs of fixed-size structs addressed by uint32 index,
// with free lists: a leaf is 64 bytes (key and value hash), an internal
// node 76 (two child indices, the bit, two stale flags, and its two
// children's hashes). A node's hash is cached in its parent, so rehashing
// a node whose child did not change reads nothing but the node, and a
// proof step is read off the path itself. A tree of N keys has N leaves
// and N-1 internal nodes: about 140 heap bytes per key. In steady state
// Set, Delete, Get, Root, ProveInto (with a reused Proof) and Verify
// allocate nothing, except that a Root with thousands of stale hashes
// (a large block, a rebuild) hashes the root's two subtrees on two
// goroutines, which share no node and each have a hasher, so the root
// and the count of hashes are those of one. A tree holds at most 2^31-1
// keys.
//
// # Snapshots and rollback
//
// Clone is a deep copy (a memory copy of the slabs, O(N), no hashing).
// Because the root depends only on the set, rolling back a block is
// cheaper by undoing its changes (Set the old values, Delete what it
// inserted): that costs the same k·log N as applying them and restores the
// exact previous root.
//
// A Tree is not safe for concurrent use; Root and Prove write to it.
package merkle
