# The shader variant table. Each row compiles one .comp file with -D defines into one SPIR-V
# module named by its first column; the engine asks for kernels by that name. Kernels that come
# in one variant per weight type, KV-cache format and layout, or dtype are not written out: the
# loops below generate their rows from the lists of those types. A new quant type is one entry
# in a list (plus its code in include/weights.glsl), never a copied shader or a row per kernel.
#
# Weight types, by the suffix the engine asks for (kernels.cpp kWeightVariants, formats/tiles.h):
#   float    f32 f16 bf16                    WTYPE_<TYPE>
#   block32  q8_0 q4_0 q4_1                  WTYPE_<TYPE>
#   tiles    q8_0_t32v q4_0_t32v q4_1_t32v   WTYPE_<BASE>,W_TILES: block32 rows stored tile-major
#   rows32   q5_0 q5_1                       WTYPE_<TYPE>: 32-element blocks in the file's rows only
#   kquant   q4_k q5_k q6_k                  WTYPE_<TYPE>
#   mlx      mlx<bits>_g<group>              WTYPE_MLX,MLX_BITS=<bits>,W_BLOCK=<group>
# KV caches: <kernel>[_<format>][_<layout>] (kernels.cpp cache_variant). Formats
# (include/kv_format.glsl): f16 (no suffix, no defines), or <k> for K and V in format k, or
# <k>_<v> for K in k and V in v (K_FORMAT, V_FORMAT). Layouts (include/kv_rows.glsl): one
# buffer (no suffix), a ring (_ring, KV_RING) and blocks (_blocks, KV_BLOCKS).
# Each gemm and gemm_cm kernel also comes in a short form, gemm_short_<wtype> (GEMM_SHORT) and
# gemm_cm_short_<wtype> (GEMM_CM_SHORT), the latter also in wider tiles, gemm_cm_short_wide_<wtype>
# (GEMM_CM_SHORT_WIDE): tile shapes in include/gemm_tiles.h.

# akunu_kernel(NAME SOURCE [DEFINE...]): one row of the table; empty defines are left out.
function(akunu_kernel name source)
  set(defines "")
  foreach(d IN LISTS ARGN)
    if(NOT d STREQUAL "")
      list(APPEND defines "${d}")
    endif()
  endforeach()
  list(JOIN defines "," defines)
  string(STRIP "${name} ${source} ${defines}" row)
  set(AKUNU_KERNELS ${AKUNU_KERNELS} "${row}" PARENT_SCOPE)
endfunction()

# The one-off rows.
#            name                 source          defines
set(AKUNU_KERNELS
  "fill_u32         fill.comp       DTYPE=uint,FILL_RAW_BITS"
  "copy_u32         copy.comp"
  "read_u32         copy.comp       READ_ONLY"
  "rmsnorm_f32_f16  rmsnorm.comp    DTYPE=float,DTYPE4=vec4,YTYPE=float16_t,YTYPE4=f16vec4"
  "rope_only        rope_kv.comp    ROPE_ONLY"
  "last_row         last_row.comp"
  "softcap          softcap.comp"
  "hadamard_rows    hadamard_rows.comp"
  "act_gelu         act.comp        ACT_GELU,ACT_UNGATED"
  "to_half          act.comp        ACT_NONE,ACT_UNGATED,OTYPE=float16_t"
  "sample           sample.comp"
  "layernorm        layernorm.comp"
  "encoder_attention encoder_attention.comp"
  "encoder_attention_weights encoder_attention.comp ATTN_WEIGHTS"
  "window_attention window_attention.comp"
  "span_split       span_split.comp"
  "conv_gather      conv_gather.comp"
  "copy_rows        copy_rows.comp"
  "whisper_chain_rows whisper_chain_rows.comp"
  "whisper_pick     whisper_pick.comp"
  "pool             pool.comp"
  "mel_power        mel_power.comp"
  "mel_log          mel_log.comp"
  "mel_norm         mel_norm.comp"
)

# ---- dtypes x kernels: elementwise kernels of f32 and f16 rows (GLSL scalar and vec4 types),
# and the kernels whose output may be written as halves (_f16: OTYPE=float16_t).
set(glsl_f32 float)
set(glsl4_f32 vec4)
set(glsl_f16 float16_t)
set(glsl4_f16 f16vec4)
foreach(dtype f32 f16)
  akunu_kernel(fill_${dtype} fill.comp DTYPE=${glsl_${dtype}})
  akunu_kernel(add_${dtype} add.comp DTYPE=${glsl_${dtype}})
  akunu_kernel(rmsnorm_${dtype} rmsnorm.comp DTYPE=${glsl_${dtype}} DTYPE4=${glsl4_${dtype}})
endforeach()
foreach(out "" _f16)
  set(otype "")
  if(out)
    set(otype OTYPE=float16_t)
  endif()
  foreach(act silu gelu_tanh)
    string(TOUPPER "ACT_${act}" act_define)
    akunu_kernel(act_${act}${out} act.comp ${act_define} ${otype})
  endforeach()
  foreach(hd 64 128)
    akunu_kernel(flash_cm_d${hd}${out} flash_cm.comp HD=${hd} ${otype})
  endforeach()
endforeach()

# ---- Weight types x kernels. wtype_<type>: the defines that select the type's code.
set(wtypes_float f32 f16 bf16)
set(wtypes_block32 q8_0 q4_0 q4_1)
set(wtypes_rows32 q5_0 q5_1)
set(wtypes_kquant q4_k q5_k q6_k)
set(wtypes_tiles "")
set(wtypes_mlx "")
foreach(type IN LISTS wtypes_float wtypes_block32 wtypes_rows32 wtypes_kquant)
  string(TOUPPER "WTYPE_${type}" wtype_${type})
endforeach()
foreach(type IN LISTS wtypes_block32)
  list(APPEND wtypes_tiles ${type}_t32v)
  set(wtype_${type}_t32v "${wtype_${type}},W_TILES")
endforeach()
foreach(bits 4 8)
  foreach(group 32 64 128)
    list(APPEND wtypes_mlx mlx${bits}_g${group})
    set(wtype_mlx${bits}_g${group} "WTYPE_MLX,MLX_BITS=${bits},W_BLOCK=${group}")
  endforeach()
endforeach()

foreach(type IN LISTS wtypes_float wtypes_block32 wtypes_rows32 wtypes_kquant wtypes_mlx)
  akunu_kernel(gemv_${type} gemv.comp ${wtype_${type}})
  akunu_kernel(embed_${type} embed.comp ${wtype_${type}})
endforeach()
# The fused float GEMVs: gate and up with the activation between; Q, K and V with rope_kv.
foreach(type IN LISTS wtypes_float)
  akunu_kernel(gemv_gate_up_${type} gemv_gate_up.comp ${wtype_${type}})
  akunu_kernel(gemv_parts_${type} gemv_parts.comp ${wtype_${type}})
endforeach()
# The 32-element block formats' integer-dot GEMVs (row-major), and the GEMVs of their
# tile-major forms (gemv_tiles.comp reads only those, so it sets W_TILES itself); X_INT8: the
# integer-dot GEMV of tiles. gemm_rows: the tile GEMV of several rows of x (few-row GEMMs).
foreach(type IN LISTS wtypes_block32)
  akunu_kernel(gemv_dot_${type} gemv_dot.comp ${wtype_${type}})
  akunu_kernel(gemv_${type}_t32v gemv_tiles.comp ${wtype_${type}})
  akunu_kernel(gemv_dot_${type}_t32v gemv_tiles.comp ${wtype_${type}} X_INT8)
  akunu_kernel(gemm_rows_${type}_t32v gemm_rows.comp ${wtype_${type}})
  akunu_kernel(gemm_rows_dot_${type}_t32v gemm_rows.comp ${wtype_${type}} X_INT8)
endforeach()
foreach(gemm gemm gemm_cm)
  string(TOUPPER "${gemm}_SHORT" short)
  foreach(type IN LISTS wtypes_float wtypes_block32 wtypes_rows32 wtypes_tiles wtypes_kquant wtypes_mlx)
    akunu_kernel(${gemm}_${type} ${gemm}.comp ${wtype_${type}})
    akunu_kernel(${gemm}_short_${type} ${gemm}.comp ${wtype_${type}} ${short})
  endforeach()
endforeach()
foreach(type IN LISTS wtypes_float wtypes_block32 wtypes_rows32 wtypes_tiles wtypes_kquant wtypes_mlx)
  akunu_kernel(gemm_cm_short_wide_${type} gemm_cm.comp ${wtype_${type}} GEMM_CM_SHORT GEMM_CM_SHORT_WIDE)
endforeach()
foreach(type IN LISTS wtypes_block32 wtypes_rows32 wtypes_tiles wtypes_kquant)
  akunu_kernel(dequant_f16_${type} dequant.comp ${wtype_${type}})
endforeach()

# ---- KV-cache formats x layouts. kv_<format>: K_FORMAT and V_FORMAT from the format's name.
set(kv_formats q8 int4 fp4 q8_int4 q8_fp4)
foreach(format IN LISTS kv_formats)
  string(REPLACE "_" ";" sides "${format}")
  list(GET sides 0 k)
  list(GET sides -1 v)
  string(TOUPPER "K_FORMAT=KV_${k},V_FORMAT=KV_${v}" kv_${format})
endforeach()
set(kv_layout_full "")
set(kv_layout_ring KV_RING)
set(kv_layout_blocks KV_BLOCKS)
foreach(layout full ring blocks)
  set(suffix "")
  if(NOT layout STREQUAL "full")
    set(suffix _${layout})
  endif()
  # rope_kv writes f16 caches; kv_store (after rope_only) the quantized formats; the
  # attentions read every format.
  akunu_kernel(rope_kv${suffix} rope_kv.comp ${kv_layout_${layout}})
  foreach(format IN LISTS kv_formats)
    akunu_kernel(kv_store_${format}${suffix} kv_store.comp ${kv_${format}} ${kv_layout_${layout}})
  endforeach()
  foreach(attention attention_split flash_attention)
    akunu_kernel(${attention}${suffix} ${attention}.comp ${kv_layout_${layout}})
    foreach(format IN LISTS kv_formats)
      akunu_kernel(${attention}_${format}${suffix} ${attention}.comp ${kv_${format}} ${kv_layout_${layout}})
      # _recent: the format with its recent window in f16 (kv_recent.glsl).
      akunu_kernel(${attention}_${format}${suffix}_recent ${attention}.comp
                   ${kv_${format}},KV_RECENT ${kv_layout_${layout}})
    endforeach()
  endforeach()
  # _pack: decode attention that packs the step's own row (kernels::attention_packs_newest).
  if(NOT layout STREQUAL "ring")
    foreach(format IN LISTS kv_formats)
      akunu_kernel(attention_split_${format}${suffix}_pack attention_split.comp
                   ${kv_${format}},KV_PACK ${kv_layout_${layout}})
      akunu_kernel(attention_split_${format}${suffix}_recent_pack attention_split.comp
                   ${kv_${format}},KV_RECENT,KV_PACK ${kv_layout_${layout}})
    endforeach()
  endif()
endforeach()
akunu_kernel(kv_recent_store kv_recent_store.comp)

# A batched step's cache (_batch: KV_BLOCKS,KV_BATCH, kv_rows.glsl): blocks of a pool shared by
# many sequences, each row of the step in its own sequence's blocks; attention_rows attends them.
set(kv_layout_batch KV_BLOCKS,KV_BATCH)
akunu_kernel(rope_kv_batch rope_kv.comp ${kv_layout_batch})
# The Q/K/V GEMVs with rope_kv folded (rope_fold.glsl), writing K and V into a cache in blocks
# (_blocks) or a one-row step's into its sequence's blocks (_batch: a batch's one-row table).
foreach(layout blocks batch)
  foreach(type IN LISTS wtypes_float)
    akunu_kernel(gemv_parts_${type}_${layout} gemv_parts.comp ${wtype_${type}} ${kv_layout_${layout}})
  endforeach()
  foreach(type IN LISTS wtypes_block32)
    akunu_kernel(gemv_${type}_t32v_${layout} gemv_tiles.comp ${wtype_${type}} ${kv_layout_${layout}})
    akunu_kernel(gemv_dot_${type}_t32v_${layout} gemv_tiles.comp ${wtype_${type}} X_INT8 ${kv_layout_${layout}})
  endforeach()
endforeach()
akunu_kernel(rope_only_batch rope_kv.comp ROPE_ONLY,${kv_layout_batch})
# Runs of one sequence's rows attend in query tiles: flash_attention in every format, flash_cm
# for an f16 pool (kernels::batch_tile_rows).
akunu_kernel(attention_rows_batch attention_rows.comp ${kv_layout_batch})
# Decode rows (and prompt rows outside the tiles) in attention_split's layout, where
# kernels::batch_row_split takes them; attention_rows where it does not.
akunu_kernel(attention_split_batch attention_split.comp ${kv_layout_batch})
akunu_kernel(flash_attention_batch flash_attention.comp ${kv_layout_batch})
foreach(hd 64 128)
  akunu_kernel(flash_cm_d${hd}_batch flash_cm.comp HD=${hd} ${kv_layout_batch})
endforeach()
foreach(format IN LISTS kv_formats)
  akunu_kernel(kv_store_${format}_batch kv_store.comp ${kv_${format}} ${kv_layout_batch})
  akunu_kernel(attention_rows_${format}_batch attention_rows.comp ${kv_${format}} ${kv_layout_batch})
  akunu_kernel(flash_attention_${format}_batch flash_attention.comp ${kv_${format}} ${kv_layout_batch})
  akunu_kernel(attention_rows_${format}_batch_recent attention_rows.comp
               ${kv_${format}},KV_RECENT ${kv_layout_batch})
  akunu_kernel(attention_split_${format}_batch attention_split.comp ${kv_${format}} ${kv_layout_batch})
  akunu_kernel(attention_split_${format}_batch_recent attention_split.comp
               ${kv_${format}},KV_RECENT ${kv_layout_batch})
endforeach()
akunu_kernel(kv_recent_store_batch kv_recent_store.comp KV_BATCH)
akunu_kernel(sample_batch sample.comp SAMPLE_BATCH)

set(AKUNU_SHADER_DIR ${CMAKE_CURRENT_LIST_DIR})
set(AKUNU_SPIRV_DIR ${CMAKE_CURRENT_BINARY_DIR}/spirv)
file(MAKE_DIRECTORY ${AKUNU_SPIRV_DIR})
file(GLOB AKUNU_SHADER_INCLUDES CONFIGURE_DEPENDS ${AKUNU_SHADER_DIR}/include/*)

set(AKUNU_SPV_FILES "")
set(AKUNU_KERNEL_NAMES "")
foreach(row IN LISTS AKUNU_KERNELS)
  string(REGEX REPLACE " +" ";" fields "${row}")
  list(GET fields 0 name)
  list(GET fields 1 source)
  if(name IN_LIST AKUNU_KERNEL_NAMES)
    message(FATAL_ERROR "shaders/kernels.cmake: two rows make the kernel ${name}")
  endif()
  set(define_lists "")
  list(LENGTH fields n_fields)
  if(n_fields GREATER 2)
    list(SUBLIST fields 2 -1 define_lists)
  endif()
  set(defines "")
  foreach(group IN LISTS define_lists)
    string(REPLACE "," ";" group "${group}")
    foreach(d IN LISTS group)
      list(APPEND defines "-D${d}")
    endforeach()
  endforeach()
  set(spv ${AKUNU_SPIRV_DIR}/${name}.spv)
  add_custom_command(
    OUTPUT ${spv}
    COMMAND Vulkan::glslangValidator --quiet -V --target-env vulkan1.2
            -I${AKUNU_SHADER_DIR}/include ${defines} -DKERNEL_NAME=${name}
            -o ${spv} ${AKUNU_SHADER_DIR}/${source}
    DEPENDS ${AKUNU_SHADER_DIR}/${source} ${AKUNU_SHADER_INCLUDES}
    COMMENT "glslang ${name}"
    VERBATIM)
  list(APPEND AKUNU_SPV_FILES ${spv})
  list(APPEND AKUNU_KERNEL_NAMES ${name})
endforeach()

# Kernels on GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix2, which Debian 12's
# glslang (12.0) cannot compile: built by cmake/glsl_slang.py with the glslang in PyPI's slangpy
# wheel where AKUNU_SLANG_GLSLANG names its libslang-glslang .so (scripts/gpu_check.sh passes
# it). Without them the engine keeps gemm_cm.comp (DeviceProfile::gemm_coopmat2 stays off).
set(AKUNU_SLANG_GLSLANG "" CACHE FILEPATH "slangpy's libslang-glslang .so, to build the cooperative-matrix-2 kernels")
set(AKUNU_KERNELS_CM2
  "gemm_cm2_f16     gemm_cm2.comp"
)
if(AKUNU_SLANG_GLSLANG)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  foreach(row IN LISTS AKUNU_KERNELS_CM2)
    string(REGEX REPLACE " +" ";" fields "${row}")
    list(GET fields 0 name)
    list(GET fields 1 source)
    set(spv ${AKUNU_SPIRV_DIR}/${name}.spv)
    add_custom_command(
      OUTPUT ${spv}
      COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/../cmake/glsl_slang.py --lib ${AKUNU_SLANG_GLSLANG}
              -I ${AKUNU_SHADER_DIR}/include -DKERNEL_NAME=${name} ${AKUNU_SHADER_DIR}/${source} ${spv}
      DEPENDS ${AKUNU_SHADER_DIR}/${source} ${AKUNU_SHADER_INCLUDES} ${CMAKE_CURRENT_LIST_DIR}/../cmake/glsl_slang.py
      COMMENT "glslang (slangpy) ${name}"
      VERBATIM)
    list(APPEND AKUNU_SPV_FILES ${spv})
    list(APPEND AKUNU_KERNEL_NAMES ${name})
  endforeach()
endif()

# All SPIR-V modules become one generated C++ file holding a {name, words} table.
set(AKUNU_SPIRV_CPP ${CMAKE_CURRENT_BINARY_DIR}/spirv_library_data.cpp)
add_custom_command(
  OUTPUT ${AKUNU_SPIRV_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${AKUNU_SPIRV_CPP} -DDIR=${AKUNU_SPIRV_DIR}
          "-DNAMES=${AKUNU_KERNEL_NAMES}" -P ${CMAKE_CURRENT_LIST_DIR}/../cmake/embed_spirv.cmake
  DEPENDS ${AKUNU_SPV_FILES} ${CMAKE_CURRENT_LIST_DIR}/../cmake/embed_spirv.cmake
  COMMENT "embedding SPIR-V"
  VERBATIM)
add_custom_target(akunu_shaders DEPENDS ${AKUNU_SPIRV_CPP})
