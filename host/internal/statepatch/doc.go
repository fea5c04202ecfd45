// Package statepatch applies the state patches plugins return (the RFC 6902
// subset of abi.PatchOp: add, with "/-" to append, replace and remove) to a
// provider's raw JSON state, and reads arrays out of that state, without
// decoding the state.
//
// # Why
//
// A history plugin's state grows with the conversation: 1000 messages of
// about 500 bytes is half a megabyte. A store adds two to four messages. If
// applying that meant decoding, re-encoding and re-validating the whole state,
// store would cost in proportion to the history and the point of returning a
// delta (keeping the plugin's work small) would be lost on the host side.
//
// # Design
//
// A Doc holds the document's bytes in a buffer it owns, with spare capacity,
// and a lazily built index of value spans: a tree of nodes, one per value
// the patches have touched, each holding its offset relative to its parent
// and its size, and for containers the spans of their direct children. A
// container is indexed the first time a path goes through it, by one scan
// that skips over its children without decoding them.
//
// An edit is one splice of the buffer (move the bytes after the edit point,
// write the new bytes; for an append to an array that ends near the end of
// the document, only a few closing brackets move) plus an index update that
// touches only the edited container, its ancestors and the siblings after
// them: offsets are relative, so nothing inside a shifted sibling changes.
// Appending k messages to an array of n therefore costs O(k), not O(n), once
// the Doc exists.
//
// Validation is incremental: for each operation, the state schema is asked
// (schema.Schema.Local) for the subschemas the new value must satisfy at its
// location, and only the new value is validated. Where the schema has a
// keyword that makes such a local check unsound (array-level keywords such
// as maxItems or uniqueItems, combinators, conditionals or unevaluated*
// on the path) the whole patched document is validated instead.
//
// Apply is atomic: if any operation fails, or the patched document is
// invalid, every splice is undone and the Doc is as before.
//
// A Doc edits its buffer in place and never hands it out: Bytes returns a
// copy, so a state a caller holds never changes under it. That copy is the
// one cost of a patch that grows with the state (an allocation and a memcpy
// of the whole document, which no in-place scheme can avoid: a longer JSON
// value never has a shorter one as its prefix, so an append rewrites the
// closing brackets a holder of the old bytes sees); the splice, the index
// update and the validation stay O(appended). Get and Elements return views that stay valid only until the
// next Apply. A Cache keeps Docs between calls and finds them by content, so
// the host can hand a state's bytes back and get the indexed Doc without a
// scan.
package statepatch
