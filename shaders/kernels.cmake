# The shader variant table. Each row compiles one .comp file with -D defines into one SPIR-V
# module named by its first column; the engine asks for kernels by that name. A new dtype or
# quant type is a new row here, never a copied shader. The KV-cache kernels come in three
# cache layouts (shaders/include/kv_rows.glsl): one buffer, a ring (_ring) and blocks (_blocks).
# Each gemm_<wtype> row is also compiled as gemm_short_<wtype> (GEMM_SHORT, below the table),
# and each gemm_cm_<wtype> row as gemm_cm_short_<wtype> (GEMM_CM_SHORT).
# gemm_cmA_f16 and gemm_cmS_f16 are other tile shapes of the cooperative-matrix GEMM, for
# bench/gemm_probe.py (AKUNU_GEMM_CM=A:128:128, S:64:128); the engine uses gemm_cm_<wtype>.
#
#            name                 source          defines
set(AKUNU_KERNELS
  "fill_f32         fill.comp       DTYPE=float"
  "fill_f16         fill.comp       DTYPE=float16_t"
  "fill_u32         fill.comp       DTYPE=uint,FILL_RAW_BITS"
  "copy_u32         copy.comp"
  "read_u32         copy.comp       READ_ONLY"
  "add_f32          add.comp        DTYPE=float"
  "add_f16          add.comp        DTYPE=float16_t"
  "rmsnorm_f32      rmsnorm.comp    DTYPE=float,DTYPE4=vec4"
  "rmsnorm_f16      rmsnorm.comp    DTYPE=float16_t,DTYPE4=f16vec4"
  "rmsnorm_f32_f16  rmsnorm.comp    DTYPE=float,DTYPE4=vec4,YTYPE=float16_t,YTYPE4=f16vec4"
  "gemv_f32         gemv.comp       WTYPE_F32"
  "gemv_f16         gemv.comp       WTYPE_F16"
  "gemv_bf16        gemv.comp       WTYPE_BF16"
  "gemv_q8_0        gemv.comp       WTYPE_Q8_0"
  "gemv_q4_0        gemv.comp       WTYPE_Q4_0"
  "gemv_q4_1        gemv.comp       WTYPE_Q4_1"
  "gemv_dot_q8_0    gemv_dot.comp   WTYPE_Q8_0"
  "gemv_dot_q4_0    gemv_dot.comp   WTYPE_Q4_0"
  "gemv_dot_q4_1    gemv_dot.comp   WTYPE_Q4_1"
  "gemv_words_q8_0  gemv_dot.comp   WTYPE_Q8_0,XW_FLOAT"
  "gemv_words_q4_0  gemv_dot.comp   WTYPE_Q4_0,XW_FLOAT"
  "gemv_words_q4_1  gemv_dot.comp   WTYPE_Q4_1,XW_FLOAT"
  "gemv_q8_0_t32v   gemv_tiles.comp WTYPE_Q8_0"
  "gemv_q4_0_t32v   gemv_tiles.comp WTYPE_Q4_0"
  "gemv_q4_1_t32v   gemv_tiles.comp WTYPE_Q4_1"
  "gemv_dot_q8_0_t32v gemv_tiles.comp WTYPE_Q8_0,X_INT8"
  "gemv_dot_q4_0_t32v gemv_tiles.comp WTYPE_Q4_0,X_INT8"
  "gemv_dot_q4_1_t32v gemv_tiles.comp WTYPE_Q4_1,X_INT8"
  "gemv_q4_k        gemv.comp       WTYPE_Q4_K"
  "gemv_q5_k        gemv.comp       WTYPE_Q5_K"
  "gemv_q6_k        gemv.comp       WTYPE_Q6_K"
  "gemv_mlx4_g32    gemv.comp       WTYPE_MLX,MLX_BITS=4,W_BLOCK=32"
  "gemv_mlx4_g64    gemv.comp       WTYPE_MLX,MLX_BITS=4,W_BLOCK=64"
  "gemv_mlx4_g128   gemv.comp       WTYPE_MLX,MLX_BITS=4,W_BLOCK=128"
  "gemv_mlx8_g32    gemv.comp       WTYPE_MLX,MLX_BITS=8,W_BLOCK=32"
  "gemv_mlx8_g64    gemv.comp       WTYPE_MLX,MLX_BITS=8,W_BLOCK=64"
  "gemv_mlx8_g128   gemv.comp       WTYPE_MLX,MLX_BITS=8,W_BLOCK=128"
  "gemm_f32         gemm.comp       WTYPE_F32"
  "gemm_f16         gemm.comp       WTYPE_F16"
  "gemm_bf16        gemm.comp       WTYPE_BF16"
  "gemm_q8_0        gemm.comp       WTYPE_Q8_0"
  "gemm_q4_0        gemm.comp       WTYPE_Q4_0"
  "gemm_q4_1        gemm.comp       WTYPE_Q4_1"
  "gemm_q8_0_t32v   gemm.comp       WTYPE_Q8_0,W_TILES"
  "gemm_q4_0_t32v   gemm.comp       WTYPE_Q4_0,W_TILES"
  "gemm_q4_1_t32v   gemm.comp       WTYPE_Q4_1,W_TILES"
  "gemm_q4_k        gemm.comp       WTYPE_Q4_K"
  "gemm_q5_k        gemm.comp       WTYPE_Q5_K"
  "gemm_q6_k        gemm.comp       WTYPE_Q6_K"
  "gemm_mlx4_g32    gemm.comp       WTYPE_MLX,MLX_BITS=4,W_BLOCK=32"
  "gemm_mlx4_g64    gemm.comp       WTYPE_MLX,MLX_BITS=4,W_BLOCK=64"
  "gemm_mlx4_g128   gemm.comp       WTYPE_MLX,MLX_BITS=4,W_BLOCK=128"
  "gemm_mlx8_g32    gemm.comp       WTYPE_MLX,MLX_BITS=8,W_BLOCK=32"
  "gemm_mlx8_g64    gemm.comp       WTYPE_MLX,MLX_BITS=8,W_BLOCK=64"
  "gemm_mlx8_g128   gemm.comp       WTYPE_MLX,MLX_BITS=8,W_BLOCK=128"
  "gemm_cmA_f16      gemm_cm.comp    WTYPE_F16,AKUNU_GEMM_CM_SG_M=4,AKUNU_GEMM_CM_SG_N=2,AKUNU_GEMM_CM_TM=2,AKUNU_GEMM_CM_TN=4,AKUNU_GEMM_CM_STAGES=1"
  "gemm_cmS_f16      gemm_cm.comp    WTYPE_F16,AKUNU_GEMM_CM_SG_M=2,AKUNU_GEMM_CM_SG_N=4,AKUNU_GEMM_CM_TM=2,AKUNU_GEMM_CM_TN=2,AKUNU_GEMM_CM_STAGES=1"
  "dequant_f16_q8_0     dequant.comp    WTYPE_Q8_0"
  "dequant_f16_q4_0     dequant.comp    WTYPE_Q4_0"
  "dequant_f16_q4_1     dequant.comp    WTYPE_Q4_1"
  "dequant_f16_q8_0_t32v dequant.comp   WTYPE_Q8_0,W_TILES"
  "dequant_f16_q4_0_t32v dequant.comp   WTYPE_Q4_0,W_TILES"
  "dequant_f16_q4_1_t32v dequant.comp   WTYPE_Q4_1,W_TILES"
  "dequant_f16_q4_k     dequant.comp    WTYPE_Q4_K"
  "dequant_f16_q5_k     dequant.comp    WTYPE_Q5_K"
  "dequant_f16_q6_k     dequant.comp    WTYPE_Q6_K"
  "gemm_cm_f32          gemm_cm.comp    WTYPE_F32"
  "gemm_cm_f16          gemm_cm.comp    WTYPE_F16"
  "gemm_cm_bf16         gemm_cm.comp    WTYPE_BF16"
  "gemm_cm_q8_0         gemm_cm.comp    WTYPE_Q8_0"
  "gemm_cm_q4_0         gemm_cm.comp    WTYPE_Q4_0"
  "gemm_cm_q4_1         gemm_cm.comp    WTYPE_Q4_1"
  "gemm_cm_q8_0_t32v    gemm_cm.comp    WTYPE_Q8_0,W_TILES"
  "gemm_cm_q4_0_t32v    gemm_cm.comp    WTYPE_Q4_0,W_TILES"
  "gemm_cm_q4_1_t32v    gemm_cm.comp    WTYPE_Q4_1,W_TILES"
  "gemm_cm_q4_k         gemm_cm.comp    WTYPE_Q4_K"
  "gemm_cm_q5_k         gemm_cm.comp    WTYPE_Q5_K"
  "gemm_cm_q6_k         gemm_cm.comp    WTYPE_Q6_K"
  "gemm_cm_mlx4_g32     gemm_cm.comp    WTYPE_MLX,MLX_BITS=4,W_BLOCK=32"
  "gemm_cm_mlx4_g64     gemm_cm.comp    WTYPE_MLX,MLX_BITS=4,W_BLOCK=64"
  "gemm_cm_mlx4_g128    gemm_cm.comp    WTYPE_MLX,MLX_BITS=4,W_BLOCK=128"
  "gemm_cm_mlx8_g32     gemm_cm.comp    WTYPE_MLX,MLX_BITS=8,W_BLOCK=32"
  "gemm_cm_mlx8_g64     gemm_cm.comp    WTYPE_MLX,MLX_BITS=8,W_BLOCK=64"
  "gemm_cm_mlx8_g128    gemm_cm.comp    WTYPE_MLX,MLX_BITS=8,W_BLOCK=128"
  "embed_f32        embed.comp      WTYPE_F32"
  "embed_f16        embed.comp      WTYPE_F16"
  "embed_bf16       embed.comp      WTYPE_BF16"
  "embed_q8_0       embed.comp      WTYPE_Q8_0"
  "embed_q4_0       embed.comp      WTYPE_Q4_0"
  "embed_q4_1       embed.comp      WTYPE_Q4_1"
  "embed_q4_k       embed.comp      WTYPE_Q4_K"
  "embed_q5_k       embed.comp      WTYPE_Q5_K"
  "embed_q6_k       embed.comp      WTYPE_Q6_K"
  "embed_mlx4_g32   embed.comp      WTYPE_MLX,MLX_BITS=4,W_BLOCK=32"
  "embed_mlx4_g64   embed.comp      WTYPE_MLX,MLX_BITS=4,W_BLOCK=64"
  "embed_mlx4_g128  embed.comp      WTYPE_MLX,MLX_BITS=4,W_BLOCK=128"
  "embed_mlx8_g32   embed.comp      WTYPE_MLX,MLX_BITS=8,W_BLOCK=32"
  "embed_mlx8_g64   embed.comp      WTYPE_MLX,MLX_BITS=8,W_BLOCK=64"
  "embed_mlx8_g128  embed.comp      WTYPE_MLX,MLX_BITS=8,W_BLOCK=128"
  "rope_kv          rope_kv.comp"
  "rope_only        rope_kv.comp    ROPE_ONLY"
  "rope_kv_ring rope_kv.comp KV_RING"
  "rope_kv_blocks rope_kv.comp KV_BLOCKS"
  "kv_store_q8      kv_store.comp   K_FORMAT=KV_Q8,V_FORMAT=KV_Q8"
  "kv_store_int4    kv_store.comp   K_FORMAT=KV_INT4,V_FORMAT=KV_INT4"
  "kv_store_fp4     kv_store.comp   K_FORMAT=KV_FP4,V_FORMAT=KV_FP4"
  "kv_store_q8_int4 kv_store.comp   K_FORMAT=KV_Q8,V_FORMAT=KV_INT4"
  "kv_store_q8_fp4  kv_store.comp   K_FORMAT=KV_Q8,V_FORMAT=KV_FP4"
  "kv_store_q8_ring kv_store.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8,KV_RING"
  "kv_store_int4_ring kv_store.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4,KV_RING"
  "kv_store_fp4_ring kv_store.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4,KV_RING"
  "kv_store_q8_int4_ring kv_store.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4,KV_RING"
  "kv_store_q8_fp4_ring kv_store.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4,KV_RING"
  "kv_store_q8_blocks kv_store.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8,KV_BLOCKS"
  "kv_store_int4_blocks kv_store.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4,KV_BLOCKS"
  "kv_store_fp4_blocks kv_store.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4,KV_BLOCKS"
  "kv_store_q8_int4_blocks kv_store.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4,KV_BLOCKS"
  "kv_store_q8_fp4_blocks kv_store.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4,KV_BLOCKS"
  "attention_split  attention_split.comp"
  "attention_split_q8 attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8"
  "attention_split_int4 attention_split.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4"
  "attention_split_fp4 attention_split.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4"
  "attention_split_q8_int4 attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4"
  "attention_split_q8_fp4 attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4"
  "attention_split_ring attention_split.comp KV_RING"
  "attention_split_q8_ring attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8,KV_RING"
  "attention_split_int4_ring attention_split.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4,KV_RING"
  "attention_split_fp4_ring attention_split.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4,KV_RING"
  "attention_split_q8_int4_ring attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4,KV_RING"
  "attention_split_q8_fp4_ring attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4,KV_RING"
  "attention_split_blocks attention_split.comp KV_BLOCKS"
  "attention_split_q8_blocks attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8,KV_BLOCKS"
  "attention_split_int4_blocks attention_split.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4,KV_BLOCKS"
  "attention_split_fp4_blocks attention_split.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4,KV_BLOCKS"
  "attention_split_q8_int4_blocks attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4,KV_BLOCKS"
  "attention_split_q8_fp4_blocks attention_split.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4,KV_BLOCKS"
  "flash_attention  flash_attention.comp"
  "flash_attention_q8 flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8"
  "flash_attention_int4 flash_attention.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4"
  "flash_attention_fp4 flash_attention.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4"
  "flash_attention_q8_int4 flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4"
  "flash_attention_q8_fp4 flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4"
  "flash_attention_ring flash_attention.comp KV_RING"
  "flash_attention_q8_ring flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8,KV_RING"
  "flash_attention_int4_ring flash_attention.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4,KV_RING"
  "flash_attention_fp4_ring flash_attention.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4,KV_RING"
  "flash_attention_q8_int4_ring flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4,KV_RING"
  "flash_attention_q8_fp4_ring flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4,KV_RING"
  "flash_attention_blocks flash_attention.comp KV_BLOCKS"
  "flash_attention_q8_blocks flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_Q8,KV_BLOCKS"
  "flash_attention_int4_blocks flash_attention.comp K_FORMAT=KV_INT4,V_FORMAT=KV_INT4,KV_BLOCKS"
  "flash_attention_fp4_blocks flash_attention.comp K_FORMAT=KV_FP4,V_FORMAT=KV_FP4,KV_BLOCKS"
  "flash_attention_q8_int4_blocks flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_INT4,KV_BLOCKS"
  "flash_attention_q8_fp4_blocks flash_attention.comp K_FORMAT=KV_Q8,V_FORMAT=KV_FP4,KV_BLOCKS"
  "flash_cm_d64     flash_cm.comp   HD=64"
  "flash_cm_d128    flash_cm.comp   HD=128"
  "flash_cm_d64_f16 flash_cm.comp   HD=64,OTYPE=float16_t"
  "flash_cm_d128_f16 flash_cm.comp  HD=128,OTYPE=float16_t"
  "last_row         last_row.comp"
  "softcap          softcap.comp"
  "act_silu         act.comp        ACT_SILU"
  "act_gelu_tanh    act.comp        ACT_GELU_TANH"
  "act_silu_f16     act.comp        ACT_SILU,OTYPE=float16_t"
  "act_gelu_tanh_f16 act.comp       ACT_GELU_TANH,OTYPE=float16_t"
  "sample           sample.comp"
  "act_gelu         act.comp        ACT_GELU,ACT_UNGATED"
  "layernorm        layernorm.comp"
  "encoder_attention encoder_attention.comp"
  "pool             pool.comp"
)
# The short form of every GEMM: gemm_<wtype> again as gemm_short_<wtype> (GEMM_SHORT), and
# gemm_cm_<wtype> as gemm_cm_short_<wtype> (GEMM_CM_SHORT); tile shapes in gemm_tiles.h.
set(short_gemms "")
foreach(row IN LISTS AKUNU_KERNELS)
  if(row MATCHES "^(gemm_cm|gemm)_([a-z0-9_]+) +([a-z_]+)\\.comp +(.+)$" AND CMAKE_MATCH_1 STREQUAL CMAKE_MATCH_3)
    string(TOUPPER "${CMAKE_MATCH_1}_SHORT" define)
    list(APPEND short_gemms "${CMAKE_MATCH_1}_short_${CMAKE_MATCH_2} ${CMAKE_MATCH_3}.comp ${CMAKE_MATCH_4},${define}")
  endif()
endforeach()
list(APPEND AKUNU_KERNELS ${short_gemms})

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
