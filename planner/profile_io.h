// Reading and writing profiles: pipetwin's JSON format ("pipetwin.profile/1") and PipeDream's graph.txt.
//
// graph.txt is imported as is: node lines "id -- description -- forward_compute_time=F,
// backward_compute_time=B, activation_size=A or [a; b], parameter_size=P" (times in ms per minibatch,
// sizes in bytes), edge lines "\tfrom -- to". A node whose description starts with "Input" is a data
// loading node. graph.txt does not record the batch size, so the caller gives it.
// All readers throw pipetwin::Error naming the file, line or field, and the fix.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "planner/profile.h"

namespace pipetwin {

// PipeDream's published image profiles were taken at 64 samples per minibatch (VGG-16's first ReLU
// output is 64 x 224 x 224 x 64 channels x 4 bytes = 822083584 bytes, as in vgg16.txt).
inline constexpr int kPipeDreamDefaultBatchSize = 64;

Profile import_pipedream_graph(const std::string& text, const std::string& path, const std::string& name,
                               int batch_size = kPipeDreamDefaultBatchSize);

nlohmann::json profile_to_json(const Profile& profile);
Profile profile_from_json(const nlohmann::json& document, const std::string& path);
void write_profile_json(const Profile& profile, const std::string& path);  // atomic

// Loads either format, detected from the content: a document starting with '{' is pipetwin JSON,
// anything else is read as graph.txt (with `graph_batch_size` samples per minibatch).
Profile load_profile(const std::string& path, int graph_batch_size = kPipeDreamDefaultBatchSize);

}  // namespace pipetwin
