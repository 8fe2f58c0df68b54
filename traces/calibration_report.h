// Calibration reports — a Calibration (calibration.h) as JSON (in validate's report) and as the
// lines `calibrate` and `validate` print.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "traces/calibration.h"

namespace pipetwin {

nlohmann::json calibration_to_json(const Calibration& calibration);
std::string calibration_text(const Calibration& calibration);

}  // namespace pipetwin
