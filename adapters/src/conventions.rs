//! Wire conventions of provider-native items, shared by every client and the provider that
//! created the item (as a real provider's API defines how its items travel).

/// Opens a provider-native opaque compaction item carried in a request message; the item's
/// `data` follows on the same line. Only the provider that created it interprets it.
pub const OPAQUE_OPEN: &str = "<provider-compaction-item";
/// Closes an opaque compaction item.
pub const OPAQUE_CLOSE: &str = "</provider-compaction-item>";
