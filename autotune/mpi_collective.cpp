// SPDX-License-Identifier: Apache-2.0
// mpi_collective.cpp - Collective over MPI_COMM_WORLD (mpi_collective.h).
#include "autotune/mpi_collective.h"

#if defined(TERNJIT_HAVE_MPI)
#include <mpi.h>
#endif

#include <string>
#include <vector>

namespace ternjit::autotune {

#if defined(TERNJIT_HAVE_MPI)

namespace {

class MpiCollective final : public Collective {
 public:
  MpiCollective() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCollective() override { MPI_Finalize(); }
  MpiCollective(const MpiCollective&) = delete;
  MpiCollective& operator=(const MpiCollective&) = delete;

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }

  std::vector<std::string> gather(const std::string& mine) const override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(size_));
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> displs(static_cast<std::size_t>(size_), 0);
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      displs[static_cast<std::size_t>(r)] = total;
      total += lens[static_cast<std::size_t>(r)];
    }
    std::string all(static_cast<std::size_t>(rank_ == 0 ? total : 0), '\0');
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (rank_ != 0) return out;
    for (int r = 0; r < size_; ++r)
      out.push_back(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
    return out;
  }

  std::string broadcast(const std::string& text) const override {
    long long len = static_cast<long long>(text.size());
    MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    std::string out = rank_ == 0 ? text : std::string(static_cast<std::size_t>(len), '\0');
    MPI_Bcast(out.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD);
    return out;
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpi_built() { return true; }

Result<std::unique_ptr<Collective>> mpi_start(int* argc, char*** argv) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return make_error(ErrorCode::Unavailable, "MPI_Init failed");
  return std::unique_ptr<Collective>(std::make_unique<MpiCollective>());
}

#else

bool mpi_built() { return false; }

Result<std::unique_ptr<Collective>> mpi_start(int*, char***) {
  return make_error(ErrorCode::Unavailable,
                    "this ternjit was built without MPI (install libopenmpi-dev, e.g. with tools/setup, and rebuild)");
}

#endif

}  // namespace ternjit::autotune
