import { Document, NodeIO } from '@gltf-transform/core';

/** An axis-aligned box room in the splat's frame and units (RUB: x right, y up, z back). */
export interface ColliderBox {
  min: [number, number, number];
  max: [number, number, number];
}

/**
 * The collider of a room: one GLB mesh of the box's floor, ceiling and four walls (24 vertices,
 * 12 triangles, normals pointing into the room so a player inside collides with the faces),
 * written with @gltf-transform/core (a maintained glTF 2.0 writer) in the same frame and units as
 * the splat, so one `metricScale` applies to both.
 */
export async function boxColliderGlb(box: ColliderBox): Promise<Buffer> {
  const [x0, y0, z0] = box.min;
  const [x1, y1, z1] = box.max;
  // Each face: four corners in order round it, and its inward normal; the triangles are wound
  // counter-clockwise about that normal (glTF's front face) whichever way the corners run.
  const faces: [number[][], number[]][] = [
    [
      [
        [x0, y0, z0],
        [x1, y0, z0],
        [x1, y0, z1],
        [x0, y0, z1],
      ],
      [0, 1, 0],
    ], // floor
    [
      [
        [x0, y1, z0],
        [x0, y1, z1],
        [x1, y1, z1],
        [x1, y1, z0],
      ],
      [0, -1, 0],
    ], // ceiling
    [
      [
        [x0, y0, z0],
        [x0, y1, z0],
        [x1, y1, z0],
        [x1, y0, z0],
      ],
      [0, 0, 1],
    ], // wall at z min
    [
      [
        [x0, y0, z1],
        [x1, y0, z1],
        [x1, y1, z1],
        [x0, y1, z1],
      ],
      [0, 0, -1],
    ], // wall at z max
    [
      [
        [x0, y0, z0],
        [x0, y0, z1],
        [x0, y1, z1],
        [x0, y1, z0],
      ],
      [1, 0, 0],
    ], // wall at x min
    [
      [
        [x1, y0, z0],
        [x1, y1, z0],
        [x1, y1, z1],
        [x1, y0, z1],
      ],
      [-1, 0, 0],
    ], // wall at x max
  ];
  const positions = new Float32Array(faces.flatMap(([corners]) => corners.flat()));
  const normals = new Float32Array(faces.flatMap(([, n]) => [n, n, n, n].flat()));
  const indices = new Uint16Array(
    faces.flatMap(([c, n], i) => {
      const a = c[1]!.map((v, k) => v - c[0]![k]!),
        b = c[2]!.map((v, k) => v - c[0]![k]!);
      const cross = [a[1]! * b[2]! - a[2]! * b[1]!, a[2]! * b[0]! - a[0]! * b[2]!, a[0]! * b[1]! - a[1]! * b[0]!];
      const ccw = cross[0]! * n[0]! + cross[1]! * n[1]! + cross[2]! * n[2]! > 0;
      return (ccw ? [0, 1, 2, 0, 2, 3] : [0, 2, 1, 0, 3, 2]).map((k) => i * 4 + k);
    }),
  );

  const doc = new Document();
  const buffer = doc.createBuffer();
  const prim = doc
    .createPrimitive()
    .setAttribute('POSITION', doc.createAccessor('position').setType('VEC3').setArray(positions).setBuffer(buffer))
    .setAttribute('NORMAL', doc.createAccessor('normal').setType('VEC3').setArray(normals).setBuffer(buffer))
    .setIndices(doc.createAccessor('indices').setType('SCALAR').setArray(indices).setBuffer(buffer));
  const mesh = doc.createMesh('room-collider').addPrimitive(prim);
  doc.createScene('room').addChild(doc.createNode('room-collider').setMesh(mesh));
  return Buffer.from(await new NodeIO().writeBinary(doc));
}
