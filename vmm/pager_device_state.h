// What the pager keeps per device (its files share it: pager.cpp and
// program_handles.cpp). Guarded by the pager's lock.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "vmm/copy_marks.h"
#include "vmm/pager.h"

namespace vgpumem::vmm {

struct Pager::DeviceState {
  DeviceState(int device, const DriverOps& driver, CapLedger& ledger, std::size_t block_chunks,
              HostPathStats* stats)
      : pool(device, driver, ledger, block_chunks, stats) {}
  ChunkPool pool;
  CUcontext context = nullptr;  // current when the device was first used: the reclaimer works in it
  // Two copy streams, one per copy engine, so that units go out and come
  // in at once: `copy_stream` to the host (offloads), `to_device_stream`
  // back (fetches). A fetch into chunks an offload still saves waits for
  // that save; an offload of a unit still arriving waits for its arrival;
  // a host buffer a fetch may still read is written only after it.
  CUstream copy_stream = nullptr;
  CUstream to_device_stream = nullptr;
  CUevent reclaim_mark = nullptr;
  // Saves are numbered in the order the copy-out stream runs them; all up
  // to saves_done have completed. A chunk a save may still read carries its
  // number (ChunkPool), and a fetch into it waits for that save alone.
  std::uint64_t saves_issued = 0, saves_done = 0;  // the reclaimer's own, recorded on the copy stream
  // The copy-in stream's reads of host buffers, numbered likewise: a save
  // into a buffer a fetch may still read waits for that read alone.
  CopyMarks fetch_marks;
  // The pieces of large saves before their last, numbered among the saves
  // (the last piece's is the unit's `saved`): a fetch given a piece's chunks
  // waits for that piece alone.
  CopyMarks save_pieces;
  bool spares_wanted = true;       // false once make_room has been needed (create_chunks_ahead)
  std::vector<std::unique_ptr<Unit>> units;  // live and retired, never deleted (see Unit::retired)
  std::map<std::uint64_t, Unit*> slabs_with_room;  // by address: first fit is deterministic
  std::vector<std::pair<std::uint64_t, Unit*>> victims;  // offload_victim's scratch: (rank, unit)
  std::uint64_t resident_bytes = 0;
  std::uint64_t resident_peak = 0;  // the most paged bytes mapped at once: what the program needed resident
};

}  // namespace vgpumem::vmm
