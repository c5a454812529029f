package sim

// kvCache is one engine's KV-cache block pool with an optional prefix cache, after vLLM V1's
// BlockPool: blocks held by a sequence are "used"; cached prefix blocks nobody holds stay
// reusable ("evictable") until a fresh allocation needs their space, oldest first. Free
// blocks (as in vllm:kv_cache_usage_perc) include evictable ones. Not safe for concurrent
// use: the engine's mutex guards it.
type kvCache struct {
	total     int
	used      int
	evictable int
	entries   map[uint64]*cacheEntry
	lru       cacheEntry // sentinel of the evictable list; lru.next is the oldest
}

// cacheEntry is one cached prompt block.
type cacheEntry struct {
	hash       uint64
	ref        int
	prev, next *cacheEntry
}

func newKVCache(total int) *kvCache {
	k := &kvCache{total: total, entries: make(map[uint64]*cacheEntry)}
	k.lru.prev, k.lru.next = &k.lru, &k.lru
	return k
}

// free is the number of blocks an allocation may use (evictable ones included).
func (k *kvCache) free() int { return k.total - k.used }

// usage is the fraction of blocks held by sequences, 0..1.
func (k *kvCache) usage() float64 { return float64(k.used) / float64(k.total) }

// alloc takes n fresh blocks, evicting the oldest unused cached blocks when needed. The
// caller has checked n <= free().
func (k *kvCache) alloc(n int) {
	for k.total-k.used-k.evictable < n {
		e := k.lru.next
		k.unlink(e)
		k.evictable--
		delete(k.entries, e.hash)
	}
	k.used += n
}

// release returns n exclusively held blocks.
func (k *kvCache) release(n int) { k.used -= n }

// lookup returns the cached entries matching the leading hashes, at most limit of them.
func (k *kvCache) lookup(hashes []uint64, limit int, out []*cacheEntry) []*cacheEntry {
	for i := 0; i < len(hashes) && i < limit; i++ {
		e, ok := k.entries[hashes[i]]
		if !ok {
			break
		}
		out = append(out, e)
	}
	return out
}

// acquire takes a reference on a cached block (making it used if it was evictable).
func (k *kvCache) acquire(e *cacheEntry) {
	if e.ref == 0 {
		k.unlink(e)
		k.evictable--
		k.used++
	}
	e.ref++
}

// drop releases a reference on a cached block; unreferenced blocks become evictable (newest
// at the back of the list).
func (k *kvCache) drop(e *cacheEntry) {
	e.ref--
	if e.ref > 0 {
		return
	}
	k.used--
	k.evictable++
	e.prev, e.next = k.lru.prev, &k.lru
	k.lru.prev.next = e
	k.lru.prev = e
}

// register turns one exclusively held, fully computed block with this hash into a cached
// block referenced by its holder; it returns nil when the hash is already cached.
func (k *kvCache) register(hash uint64) *cacheEntry {
	if _, ok := k.entries[hash]; ok {
		return nil
	}
	e := &cacheEntry{hash: hash, ref: 1}
	k.entries[hash] = e
	return e
}

func (k *kvCache) unlink(e *cacheEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

// reset empties the prefix cache; like vLLM's BlockPool.reset_prefix_cache it refuses (false)
// while sequences hold blocks.
func (k *kvCache) reset() bool {
	if k.used > 0 {
		return false
	}
	k.clear()
	return true
}

// clear drops every block and cached entry unconditionally (engine restart).
func (k *kvCache) clear() {
	k.used, k.evictable = 0, 0
	clear(k.entries)
	k.lru.prev, k.lru.next = &k.lru, &k.lru
}
