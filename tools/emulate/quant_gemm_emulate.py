#!/usr/bin/python3
# Emulates src/backend/cuda/quant_gemm_mma.cu on the CPU at the level of values and addresses:
# the cp.async ring's copies into shared memory (clamped rows and tokens, the swizzled token
# units), each lane's fragment reads, the decode's pair order (quant_mma_decode.cuh), the
# mma.sync m16n8k16 fragment layout of PTX (A rows g / g + 8 at k 2t, 2t+1, 2t+8, 2t+9; B column g;
# C rows g / g + 8 at columns 2t, 2t + 1), the per-chunk scales, the epilogue's bounds and the K
# splits (quant_gemm_split.h's qgemm_split, the wave rule by default and the two-blocks rule of
# SYV_QUANT_GEMM_WAVES=0, and the reduce), against x @ dequant(w)^T in float64; then checks
# that the kernel's 16-byte shared-memory reads are free of bank conflicts. Written to check the
# kernel's index logic where no GPU was at hand; it mirrors the kernel, so keep the two in step.
# The same for moe_quant_gemm.cu's routing, row mappings and epilogues (run_moe, below).
# Needs python3-numpy (Debian). Run: /usr/bin/python3 tools/emulate/quant_gemm_emulate.py
import numpy as np, sys
rng = np.random.default_rng(1)
kGemmWarps, kGemmRows, kStages, kChunk, kXUnits, kXRowUnits, kMinChunks = 4, 64, 3, 128, 16, 17, 4

def x_unit(u): return u ^ (((u >> 3) & 1) << 1)
def ceil_div(a, b): return -(-a // b)

def tile_nt(T):  # quant_gemm_mma.cu's qgemm_fitted_nt
    tiles = ceil_div(T, 64); nt = ceil_div(ceil_div(T, tiles), 8)
    return 2 if nt <= 2 else 8 if nt == 7 else nt

def chunks_per_split(N, K, T, sms, ws_bytes, slots):  # quant_gemm_split.h's qgemm_split
    tile = 8 * tile_nt(T)
    blocks = ceil_div(N, kGemmRows) * ceil_div(T, tile)
    chunks = K // kChunk
    max_splits = max(1, chunks // kMinChunks)
    fits = lambda s: s == 1 or s * T * N * 4 <= ws_bytes
    if slots > 0:  # the wave rule: fewest waves x (chunks a block + the ring's fill)
        per, best = chunks, None
        for s in range(1, max_splits + 1):
            p = ceil_div(chunks, s); used = ceil_div(chunks, p)
            if not fits(used): break
            cost = ceil_div(blocks * used, slots) * (p + kStages - 1)
            if best is None or cost < best: best, per = cost, p
        return per
    s = min(max(1, ceil_div(2 * sms, blocks)), max_splits)
    while not fits(s): s -= 1
    return ceil_div(chunks, s)

def run(FMT, N, K, T, gsz, zeros, sms=132, block_n=128, slots=None):
    slots = 2 * sms if slots is None else slots  # the wave rule at 2 blocks an SM (0: the old rule)
    chunks = K // kChunk
    if FMT == 1:
        q = rng.integers(0, 16, size=(N, K))
        sc = rng.uniform(0.5, 2, size=(N, K // gsz))
        z = rng.integers(0, 16, size=(N, K // gsz)) if zeros else None
        zz = z if zeros else np.full((N, K // gsz), 8)
        deq = (q - np.repeat(zz, gsz, axis=1)) * np.repeat(sc, gsz, axis=1)
        packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)  # [N, K/2]
        wbytes = packed.reshape(-1); row_bytes = K // 2
        scale_cols = K // gsz; cdiv = gsz // kChunk
    else:
        # fp8 emulated by byte codes 0..255 mapped to distinct values
        codes = rng.integers(0, 256, size=(N, K)).astype(np.uint8)
        val = lambda c: (c.astype(np.float64) - 128) / 7.0
        bk = gsz
        sc = rng.uniform(0.5, 2, size=(ceil_div(N, block_n), K // bk))
        deq = val(codes) * np.repeat(np.repeat(sc, block_n, axis=0)[:N], bk, axis=1)
        wbytes = codes.reshape(-1); row_bytes = K
        scale_cols = K // bk; cdiv = bk // kChunk
    x = rng.standard_normal((T, K))
    ref = x @ deq.T
    WU, WRU = (8, 9) if FMT == 0 else (4, 4)
    NT = tile_nt(T)
    tile_tokens = 8 * NT
    ws_bytes = N * K * 2
    cps = chunks_per_split(N, K, T, sms, ws_bytes, slots)
    S = ceil_div(chunks, cps)
    out = np.zeros((S, T, N))
    stage_units = kGemmRows * WRU + tile_tokens * kXRowUnits
    for bx in range(ceil_div(N, kGemmRows)):
      for by in range(ceil_div(T, tile_tokens)):
        for bz in range(S):
          n0, t0 = bx * kGemmRows, by * tile_tokens
          c_begin = bz * cps; nc = min(cps, chunks - c_begin)
          # smem: per stage, weight units hold (row n, unit u) ids; x units hold (tok, col range)
          smem = [None] * (stage_units * kStages)
          def load(j, s):
              c = c_begin + j; base = s * stage_units
              for i in range(kGemmRows * WU):
                  r, u = i // WU, i % WU
                  n = min(n0 + r, N - 1)
                  off = n * row_bytes + c * (WU * 16) + u * 16
                  smem[base + r * WRU + u] = wbytes[off:off + 16].copy()
              xb = base + kGemmRows * WRU
              for i in range(tile_tokens * kXUnits):
                  r, u = i // kXUnits, i % kXUnits
                  tok = t0 + r  # past T: zero-filled
                  v = x[tok, c * kChunk + u * 8: c * kChunk + u * 8 + 8].copy() if tok < T else np.zeros(8)
                  smem[xb + r * kXRowUnits + x_unit(u)] = v
          acc = np.zeros((kGemmWarps, 32, NT, 4))
          for s in range(kStages - 1):
              if s < nc: load(s, s)
          for j in range(nc):
              col = (c_begin + j) // cdiv
              nxt = j + kStages - 1
              if nxt < nc: load(nxt, nxt % kStages)
              base = (j % kStages) * stage_units; xb = base + kGemmRows * WRU
              for warp in range(kGemmWarps):
                # gather per-lane fragments, then do the mma as a matrix op
                A = np.zeros((16, 16)); B = np.zeros((NT, 16, 8)); Aset = np.zeros((16,16),bool); Bset=np.zeros((NT,16,8),bool)
                parts = {}
                part = np.zeros((32, NT, 4))
                for i in range(4):
                  for h in range(2):
                    A = np.zeros((16, 16)); Aset[:] = False
                    Bs = np.zeros((NT, 16, 8))
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        rows = [min(n0 + 16 * warp + g + 8 * r, N - 1) for r in range(2)]
                        wl = [np.concatenate([smem[base + (16 * warp + g + 8 * r) * WRU + t * (WU // 4) + v] for v in range(WU // 4)]) for r in range(2)]
                        if FMT == 1:
                            words = [w.view('<u4') for w in wl]  # 4 words each
                            zc = [ (z[rows[r], col] if zeros else 8) for r in range(2)]
                            def pair(word, J, zv):
                                return (((int(word) >> (4 * J)) & 0xf) - zv, ((int(word) >> (16 + 4 * J)) & 0xf) - zv)
                            J0, J1 = (0, 1) if h == 0 else (2, 3)
                            a = [pair(words[0][i], J0, zc[0]), pair(words[1][i], J0, zc[1]), pair(words[0][i], J1, zc[0]), pair(words[1][i], J1, zc[1])]
                        else:
                            words = [w.view('<u4') for w in wl]  # 8 words each
                            sidx = 2 * i + h
                            def fp(word, b): return (((int(word) >> (8 * b)) & 0xff) - 128) / 7.0
                            a = [(fp(words[0][sidx], 0), fp(words[0][sidx], 2)), (fp(words[1][sidx], 0), fp(words[1][sidx], 2)),
                                 (fp(words[0][sidx], 1), fp(words[0][sidx], 3)), (fp(words[1][sidx], 1), fp(words[1][sidx], 3))]
                        # A fragment placement
                        A[g, 2*t], A[g, 2*t+1] = a[0]; A[g+8, 2*t], A[g+8, 2*t+1] = a[1]
                        A[g, 2*t+8], A[g, 2*t+9] = a[2]; A[g+8, 2*t+8], A[g+8, 2*t+9] = a[3]
                        for qq in range(NT):
                            xv = smem[xb + (8 * qq + g) * kXRowUnits + x_unit(4 * t + i)]  # 8 values
                            if FMT == 1: lo, hi = (xv[2*h], xv[2*h+1]), (xv[2*h+4], xv[2*h+5])
                            else: lo, hi = (xv[4*h], xv[4*h+1]), (xv[4*h+2], xv[4*h+3])
                            b0 = (lo[0], hi[0]); b1 = (lo[1], hi[1])
                            Bs[qq, 2*t, g], Bs[qq, 2*t+1, g] = b0
                            Bs[qq, 2*t+8, g], Bs[qq, 2*t+9, g] = b1
                    for qq in range(NT):
                        C = A @ Bs[qq]  # 16 x 8
                        for lane in range(32):
                            g, t = lane >> 2, lane & 3
                            part[lane, qq] += [C[g, 2*t], C[g, 2*t+1], C[g+8, 2*t], C[g+8, 2*t+1]]
                for lane in range(32):
                    g = lane >> 2
                    rows = [min(n0 + 16 * warp + g + 8 * r, N - 1) for r in range(2)]
                    scv = [sc[rows[r], col] if FMT == 1 else sc[rows[r] // block_n, col] for r in range(2)]
                    for qq in range(NT):
                        for e in range(4):
                            acc[warp, lane, qq, e] += part[lane, qq, e] * scv[e >> 1]
          for warp in range(kGemmWarps):
              for lane in range(32):
                  g, t = lane >> 2, lane & 3
                  for qq in range(NT):
                      for e in range(4):
                          r = n0 + 16 * warp + g + (8 if e >= 2 else 0)
                          tok = t0 + 8 * qq + 2 * t + (e & 1)
                          if tok < T and r < N: out[bz, tok, r] = acc[warp, lane, qq, e]
    got = out.sum(axis=0)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    print(f"FMT {FMT} N {N} K {K} T {T} group/bk {gsz} zeros {zeros} slots {slots}: splits {S} of {cps} chunks, NT {NT}, max rel err {err:.2e}")
    return err < 1e-9

ok = True
ok &= run(1, 70, 512, 17, 128, True)
ok &= run(1, 100, 1024, 40, 256, False)
ok &= run(1, 130, 384, 70, 384, True)
ok &= run(0, 70, 512, 20, 128, False, block_n=128)
ok &= run(0, 65, 256, 33, 256, False, block_n=1)
ok &= run(1, 70, 2048, 17, 128, True)
ok &= run(0, 90, 2048, 100, 128, False, sms=200)
ok &= run(1, 64, 1536, 64, 128, False)
# The tile's width fitted to the step: NT 3 (17-24 tokens), 5, 6 (41-48; 96 as two tiles of 6).
ok &= run(1, 70, 512, 20, 128, True)
ok &= run(0, 65, 1024, 40, 128, False)
ok &= run(1, 100, 1024, 48, 256, False)
ok &= run(1, 64, 1536, 96, 128, True)
ok &= run(0, 70, 512, 9, 128, False)
# The old two-blocks rule (SYV_QUANT_GEMM_WAVES=0), and a wave rule whose last split is short
# (2176 columns: 17 chunks in splits of 6, 6 and 5).
ok &= run(1, 70, 2048, 17, 128, True, slots=0)
ok &= run(0, 90, 2048, 100, 128, False, sms=200, slots=0)
ok &= run(1, 64, 2176, 24, 128, False, slots=3)

bad = 0  # 16-byte shared loads: 8 lanes at a time, conflict-free when their units fall in 8 bank groups
for NT in (2, 3, 4, 5, 6, 8):
  for q in range(NT):
    for i in range(4):
      for phase in range(4):
        lanes = range(8 * phase, 8 * phase + 8)
        units = [((8 * q + (l >> 2)) * 17 + x_unit(4 * (l & 3) + i)) % 8 for l in lanes]
        bad += len(set(units)) != 8
for WU, WRU in ((4, 4), (8, 9)):
  for warp in range(4):
    for r8 in (0, 8):
      for v in range(WU // 4):
        for phase in range(4):
          lanes = range(8 * phase, 8 * phase + 8)
          units = [((16 * warp + (l >> 2) + r8) * WRU + (l & 3) * (WU // 4) + v) % 8 for l in lanes]
          bad += len(set(units)) != 8
print("conflicting phases:", bad)

# moe_quant_gemm.cu: the tile list of launch_moe_route (tiles of at most bm rows of one expert's
# sorted pairs), the kernels' weight rows (gate_up: a warp's rows 0-7 gate rows, 8-15 up rows of
# its 8 outputs), x rows (the pair's token; act rows by sorted position), epilogues and the
# combine in ascending expert id, with the tile main loop taken as checked above (acc[q][e] = the
# dot product of tile row 16 w + g + 8 (e >= 2) and tile token 8 q + 2 t + (e & 1)).
def run_moe(E, H, I, T, k):
    rng2 = np.random.default_rng(T * 7 + k)
    Wgu = rng2.standard_normal((E * 2 * I, H)); Wdn = rng2.standard_normal((E * H, I))
    x = rng2.standard_normal((T, H))
    ids = np.array([rng2.permutation(E)[:k] for _ in range(T)]); wts = rng2.uniform(0.1, 1, (T, k))
    silu = lambda v: v / (1 + np.exp(-v))
    ref = np.zeros((T, H))
    for t in range(T):
        for j in range(k):
            e = ids[t, j]; gu = Wgu[e * 2 * I:(e + 1) * 2 * I] @ x[t]
            ref[t] += wts[t, j] * (Wdn[e * H:(e + 1) * H] @ (silu(gu[:I]) * gu[I:]))
    P = T * k; rpe = P // min(E, P)
    NT = 2 if rpe <= 16 else 4 if rpe <= 32 else 8; bm = 8 * NT
    flat = ids.reshape(-1); sorted_ = []; tiles = []
    for e in range(E):
        pairs = [p for p in range(P) if flat[p] == e]; base = len(sorted_); sorted_ += pairs
        for r in range(0, len(pairs), bm): tiles.append((e, base + r, min(bm, len(pairs) - r)))
    act = np.zeros((P, I)); y = np.zeros((P, H))
    for gate_up in (True, False):
        K = H if gate_up else I; W = Wgu if gate_up else Wdn
        per_block = kGemmRows // 2 if gate_up else kGemmRows
        for (e, r0, rows) in tiles:
            xr = [(x[sorted_[r0 + r] // k] if gate_up else act[r0 + r]) if r < rows else np.zeros(K) for r in range(bm)]
            for by in range(ceil_div(I if gate_up else H, per_block)):
                o0 = by * per_block
                def weight_row(r):
                    if gate_up: return e * 2 * I + (I if r & 8 else 0) + min(o0 + 8 * (r >> 4) + (r & 7), I - 1)
                    return e * H + min(o0 + r, H - 1)
                for warp in range(kGemmWarps):
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        acc = [[W[weight_row(16 * warp + g + (8 if ee >= 2 else 0))] @ xr[8 * q + 2 * t + (ee & 1)] for ee in range(4)] for q in range(NT)]
                        for q in range(NT):
                            if gate_up:
                                col = o0 + 8 * warp + g
                                for ee in range(2):
                                    tok = 8 * q + 2 * t + ee
                                    if tok < rows and col < I: act[r0 + tok, col] = silu(acc[q][ee]) * acc[q][ee + 2]
                            else:
                                for ee in range(4):
                                    tok = 8 * q + 2 * t + (ee & 1); n = o0 + 16 * warp + g + (8 if ee >= 2 else 0)
                                    if tok < rows and n < H: y[sorted_[r0 + tok], n] = acc[q][ee]
    out = np.zeros((T, H))
    for t in range(T):
        for j in sorted(range(k), key=lambda j: ids[t, j]): out[t] += wts[t, j] * y[t * k + j]
    err = np.abs(out - ref).max() / np.abs(ref).max()
    print(f"MoE E {E} H {H} I {I} T {T} top_k {k}: tiles of {bm}, max rel err {err:.2e}")
    return err < 1e-9

ok &= run_moe(8, 256, 96, 9, 2)
ok &= run_moe(8, 128, 128, 40, 4)
ok &= run_moe(4, 128, 40, 70, 4)
print("ALL OK" if ok and bad == 0 else "MISMATCH")
sys.exit(0 if ok and bad == 0 else 1)
