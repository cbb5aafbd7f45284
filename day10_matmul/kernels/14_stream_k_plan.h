// Step 14's division of the work (14_stream_k.cu): which block computes which k-steps of which
// tile, and which blocks share a split tile. Plain C++ so that a host test (test_stream_k.cpp)
// checks it without a GPU; the kernel calls the same functions on the device.
#pragma once

#if defined(__CUDACC__)
#define SK_HD __host__ __device__
#else
#define SK_HD
#endif

namespace skplan {

// Every thread of every block derives the same plan from the shape and the grid size G.
struct Plan {
  int G;  // blocks in the grid
  int tiles_m, tiles_n, ktiles;
  int dp_tiles;        // tiles [0, dp_tiles): whole tiles, block b takes b, b + G, ...
  long long sk_iters;  // the k-steps of tiles [dp_tiles, tiles), laid end to end
  bool sk_first;       // a block walks its stream-K range before its whole tiles
  // First k-step of block b's stream-K range (b = G gives the end of the last range).
  SK_HD long long start(int b) const { return sk_iters * b / G; }
};

// Whole waves need no help; otherwise the partial wave (and `extra_waves` whole ones before
// it, if there are that many) goes to stream-K.
SK_HD inline Plan make_plan(int tiles_m, int tiles_n, int ktiles, int G, int extra_waves, bool sk_first) {
  Plan p;
  p.G = G;
  p.tiles_m = tiles_m;
  p.tiles_n = tiles_n;
  p.ktiles = ktiles;
  p.sk_first = sk_first;
  const int tiles = tiles_m * tiles_n, want = tiles % G + extra_waves * G;
  const int sk_tiles = tiles % G == 0 ? 0 : (want < tiles ? want : tiles);
  p.dp_tiles = tiles - sk_tiles;
  p.sk_iters = (long long)sk_tiles * ktiles;
  return p;
}

// A piece: k-steps [k0, k1) of one tile (tile index in the grouped order of steps 10-13).
struct Piece {
  int tile, k0, k1;
};

// A block's walk over its work, one piece at a time: its whole tiles and the pieces of its
// stream-K range, either first.
struct Cursor {
  int dp;            // next whole tile
  long long i, end;  // next k-step of the stream-K range, and its end
};

SK_HD inline Cursor first_piece(const Plan& p, int block) { return {block, p.start(block), p.start(block + 1)}; }

SK_HD inline bool next_piece(const Plan& p, Cursor& c, Piece& out) {
  const bool sk_left = c.i < c.end;
  if (c.dp < p.dp_tiles && !(p.sk_first && sk_left)) {
    out = {c.dp, 0, p.ktiles};
    c.dp += p.G;
    return true;
  }
  if (!sk_left) return false;
  const int j = int(c.i / p.ktiles);  // the j-th stream-K tile
  const long long t0 = (long long)j * p.ktiles, t1 = t0 + p.ktiles;
  out = {p.dp_tiles + j, int(c.i - t0), int((c.end < t1 ? c.end : t1) - t0)};
  c.i = t0 + out.k1;
  return true;
}

// A piece with k0 > 0 is a sharer's: always the first piece of its block's stream-K range.
// The piece with k0 == 0 and k1 < ktiles is the owner's: the last of its block's range. The
// owner's sharers are the blocks after it whose (non-empty) ranges start inside the tile.
// next_sharer(p, tile, b): the first sharer of `tile` after block b, or -1.
SK_HD inline int next_sharer(const Plan& p, int tile, int b) {
  const long long tile_end = (long long)(tile - p.dp_tiles + 1) * p.ktiles;
  for (int x = b + 1; x < p.G && p.start(x) < tile_end; ++x)
    if (p.start(x + 1) > p.start(x)) return x;  // an empty range (more blocks than k-steps) has no piece
  return -1;
}

}  // namespace skplan
