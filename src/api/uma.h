// The engine's one public header: what the LAMMPS styles, the fix and the
// uma tool use of it.  They include this header and no other of src/
// (tests/static/check_floors.py); the rooms behind it are free to change
// their own headers.
#pragma once

#include "core/atoms.h"        // Atoms, DeviceAtoms, Piece: the input of a step
#include "core/elements.h"     // element symbols <-> atomic numbers
#include "core/task_rules.h"   // task, charge and spin rules
#include "core/uma_error.h"    // uma::Error and its kinds
#include "runtime/device.h"    // devices and precisions by name
#include "runtime/transfers.h" // the counted host<->device transfers
#include "io/extxyz.h"         // extxyz frames
#include "io/output_path.h"    // files written next to a run
#include "io/training_data.h"  // labelled frames for training
#include "graph/radius_graph.h"  // the neighbour graph (for its benchmark)
#include "model/model.h"       // UmaModel: model files, configuration, weights
#include "engine/engine.h"     // Engine: an evaluation step, its options and results
#include "engine/memory_plan.h"  // the memory model of a step
#include "engine/packed_read.h"  // one host read of several device results
#include "train/committee.h"   // committees: the uncertainty of a prediction
#include "train/option_table.h"  // the training options by name
#include "train/sampler.h"     // frames drawn for a training step
#include "train/trainer.h"     // Trainer: loss, optimizer, one training step
#include "train/training_loop.h"  // the training loop shared by the tool and the fix
