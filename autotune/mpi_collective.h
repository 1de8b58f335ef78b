// SPDX-License-Identifier: Apache-2.0
// mpi_collective.h - the MPI Collective for tuning sweeps across ranks (`ternjit tune --mpi`).
//
// In its own library (ternjit_autotune_mpi), linked into the CLI only: libternjit never
// depends on MPI. Built without MPI (no libopenmpi-dev), mpi_start reports Unavailable.
#pragma once

#include <memory>

#include "autotune/tuner.h"
#include "ternjit/result.h"

namespace ternjit::autotune {

/// Whether this build has MPI support.
bool mpi_built();

/// Initializes MPI (MPI_Init) and returns the collective of MPI_COMM_WORLD; MPI is
/// finalized when it is destroyed. Call once per process. Errors: Unavailable (built
/// without MPI, or MPI_Init failed).
Result<std::unique_ptr<Collective>> mpi_start(int* argc, char*** argv);

}  // namespace ternjit::autotune
