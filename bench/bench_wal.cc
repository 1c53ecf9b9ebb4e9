// Google Benchmark shim over io/ws_wal.h: SQLite's WAL checksum and the
// frame-by-frame cursor that verifies a WAL, each against memcpy of the same
// bytes measured in the same run (docs/DESIGN.md: every figure is a ratio against
// a baseline). Throughput is reported as bytes/s via SetBytesProcessed.
//
//   bench_wal [--benchmark_filter=...] [--benchmark_min_time=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "ws_wal.h"
}

namespace {

constexpr size_t kWalBytes = size_t{4} << 20;  // per iteration: large enough to leave L2, small for L3

uint64_t next_rand(uint64_t *s)
{
	// xorshift64*: deterministic filler, not compressible, no libc state.
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

// A valid WAL image: header plus `frames` frames of `page_size`, every 16th a
// commit, checksums chained exactly as SQLite writes them.
struct SyntheticWal {
	std::vector<uint8_t> bytes;
	ws_wal_hdr hdr{};
	uint64_t frames = 0;
	uint32_t page_size = 0;

	SyntheticWal(uint32_t page, size_t approx_bytes, bool big_endian)
	{
		page_size = page;
		const size_t fsz = ws_wal_frame_size(page);
		frames = approx_bytes / fsz;
		if (frames == 0)
			frames = 1;
		bytes.resize(WS_WAL_HDR_SIZE + frames * fsz);
		uint64_t seed = 0x9E3779B97F4A7C15ULL;
		for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
			uint64_t v = next_rand(&seed);
			std::memcpy(&bytes[i], &v, 8);
		}
		hdr.magic = big_endian ? WS_WAL_MAGIC_BE : WS_WAL_MAGIC_LE;
		hdr.version = WS_WAL_VERSION;
		hdr.page_size = page;
		hdr.checkpoint_seq = 7;
		hdr.salt1 = 0x12345678u;
		hdr.salt2 = 0x9abcdef0u;
		ws_wal_hdr_encode(&hdr, bytes.data());
		uint32_t s[2] = { hdr.cksum1, hdr.cksum2 };
		for (uint64_t n = 1; n <= frames; n++) {
			uint8_t *f = bytes.data() + ws_wal_frame_offset(page, n);
			ws_put_be32(f, static_cast<uint32_t>((n - 1) % 1000 + 1));
			ws_put_be32(f + 4, n % 16 == 0 || n == frames ? 1000u : 0u);
			ws_put_be32(f + 8, hdr.salt1);
			ws_put_be32(f + 12, hdr.salt2);
			ws_wal_checksum(big_endian, f, 8, s);
			ws_wal_checksum(big_endian, f + WS_WAL_FRAME_HDR_SIZE, page, s);
			ws_put_be32(f + 16, s[0]);
			ws_put_be32(f + 20, s[1]);
		}
	}
};

// Baseline: memcpy of the same number of bytes.
void BM_memcpy(benchmark::State &state)
{
	std::vector<uint8_t> src(kWalBytes, 1), dst(kWalBytes);
	for (auto _ : state) {
		std::memcpy(dst.data(), src.data(), src.size());
		benchmark::DoNotOptimize(dst.data());
		benchmark::ClobberMemory();
	}
	state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(src.size()));
}
BENCHMARK(BM_memcpy);

// SQLite's cumulative checksum over one contiguous run (arg 0: 1 = big-endian words).
void BM_wal_checksum(benchmark::State &state)
{
	const bool big_endian = state.range(0) != 0;
	SyntheticWal wal(4096, kWalBytes, big_endian);
	const size_t len = (wal.bytes.size() - WS_WAL_HDR_SIZE) & ~size_t{7};
	for (auto _ : state) {
		uint32_t s[2] = { 0, 0 };
		ws_wal_checksum(big_endian, wal.bytes.data() + WS_WAL_HDR_SIZE, len, s);
		benchmark::DoNotOptimize(s[0]);
		benchmark::DoNotOptimize(s[1]);
	}
	state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(len));
	state.SetLabel(big_endian ? "big-endian words" : "little-endian words");
}
BENCHMARK(BM_wal_checksum)->Arg(0)->Arg(1);

// Verify every frame of a WAL with the cursor (arg 0: page size).
void BM_wal_cursor_step(benchmark::State &state)
{
	const uint32_t page = static_cast<uint32_t>(state.range(0));
	SyntheticWal wal(page, kWalBytes, false);
	const size_t fsz = ws_wal_frame_size(page);
	for (auto _ : state) {
		ws_wal_cursor c;
		ws_wal_cursor_init(&c, &wal.hdr);
		const uint8_t *f = wal.bytes.data() + WS_WAL_HDR_SIZE;
		for (uint64_t n = 0; n < wal.frames; n++, f += fsz) {
			if (ws_wal_cursor_step(&c, f, nullptr) != 1) {
				state.SkipWithError("synthetic WAL failed verification");
				return;
			}
		}
		benchmark::DoNotOptimize(c.last_commit);
	}
	if (state.iterations() > 0) {
		state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
					static_cast<int64_t>(wal.bytes.size() - WS_WAL_HDR_SIZE));
	}
	state.counters["frames"] = static_cast<double>(wal.frames);
}
BENCHMARK(BM_wal_cursor_step)->Arg(512)->Arg(4096)->Arg(65536);

// ws_wal_scan: header parse plus the cursor over a whole in-memory WAL.
void BM_wal_scan(benchmark::State &state)
{
	SyntheticWal wal(4096, kWalBytes, false);
	for (auto _ : state) {
		ws_wal_hdr h;
		ws_wal_cursor c;
		if (ws_wal_scan(wal.bytes.data(), wal.bytes.size(), &h, &c) != 0 || c.last_commit != wal.frames) {
			state.SkipWithError("ws_wal_scan failed");
			return;
		}
		benchmark::DoNotOptimize(c.last_commit);
	}
	if (state.iterations() > 0) {
		state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
					static_cast<int64_t>(wal.bytes.size()));
	}
}
BENCHMARK(BM_wal_scan);

}  // namespace

BENCHMARK_MAIN();
