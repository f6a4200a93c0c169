#ifndef AKUNU_INT_DOT_GLSL
#define AKUNU_INT_DOT_GLSL
// Dot products of 4 int8 packed in 32 bits (SPV_KHR_integer_dot_product, core in Vulkan 1.3).
// glslang 12 (Debian 12's) has no GL_EXT_integer_dot_product, so the instructions are declared
// here: OpSDot (signed . signed), OpUDot (unsigned . unsigned) and OpSUDot (signed . unsigned),
// capabilities DotProduct and DotProductInput4x8BitPacked, operand 0 = PackedVectorFormat4x8Bit.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int dot_s8x4(int a, int b, spirv_literal int packed_format);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int dot_s8x4_u8x4(int a, uint b, spirv_literal int packed_format);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4451)
uint dot_u8x4(uint a, uint b, spirv_literal int packed_format);
#define DOT_S8(a, b) dot_s8x4(int(a), int(b), 0)
#define DOT_S8_U8(a, b) dot_s8x4_u8x4(int(a), uint(b), 0)
#define DOT_U8(a, b) int(dot_u8x4(uint(a), uint(b), 0))
#endif
