// SPDX-License-Identifier: Apache-2.0
// ternjit.hpp - the whole public C++ API in one include (STYLE section 9: the umbrella header).
#pragma once

#include "ternjit/bitnet.h"
#include "ternjit/builder.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"
#include "ternjit/target_description.h"
#include "ternjit/tmatmul.h"
#include "ternjit/types.h"
